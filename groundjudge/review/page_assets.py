"""The review page's style and script (inline in the page: no network, works from file://).

The script reads the reports from the page's JSON (``#gj-data``) and builds the cards with DOM calls
(``textContent``, never ``innerHTML`` on data); each source arrives as static, escaped HTML with its evidence marked
(:mod:`groundjudge.review.page_sources`) and is moved into its card.
"""

# ruff: noqa: E501  (the page's inline JavaScript and CSS)
from __future__ import annotations

REVIEW_CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f4}
header{background:#20242b;color:#fff;padding:14px 24px}header h1{margin:0 0 6px;font-size:20px}
header p{margin:2px 0;font-size:14px}header b{font-weight:600}#queue-decided{opacity:.9}
#legend{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:center;font-size:12px;margin:8px 0 2px}
#legend .swatch{color:#1d1d1f;padding:0 5px;border-radius:3px;border-bottom:2px solid}
#legend .swatch.you{background:#fff;text-decoration:underline 3px #1565c0;text-underline-offset:3px}
#legend .swatch.over{background:#fff;text-decoration:underline 3px #6a1b9a;text-underline-offset:3px}
#legend mark{color:#1d1d1f}
#run{margin-top:8px;font-size:13px}#run summary{cursor:pointer;opacity:.85}
#summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:4px 24px;font-size:13px}
#summary div span{opacity:.7}
#headgrid{display:flex;flex-wrap:wrap;gap:16px 32px;align-items:flex-start;margin-top:8px}#summary{flex:1 1 480px}
#distribution svg{border-radius:6px;display:block;max-width:100%;height:auto}
#bar{padding:6px 24px;background:#fff;border-bottom:1px solid #ddd;position:sticky;top:0;z-index:2;font-size:13px}
#queuebar{display:flex;flex-wrap:wrap;gap:4px 16px;align-items:center}#progress{font-weight:600}
#progress-bar{width:140px;height:10px}
#export-holds{color:#555}#export-as.warn{color:#b26a00;font-weight:600}#reviewer.warn{outline:2px solid #b26a00}
#name-ask{background:#fff8e1;border:1px solid #b26a00;color:#6d4100;border-radius:6px;padding:4px 10px;margin:4px 0}
#storage.warn{color:#c62828;font-weight:600}#help{color:#555;margin:2px 0;font-size:12px}kbd{border:1px solid #bbb;
border-radius:3px;padding:0 4px;background:#f4f4f4;font-size:12px}
#done{background:#e8f5e9;border:1px solid #2e7d32;color:#1b5e20;border-radius:6px;padding:4px 10px;margin:4px 0;
font-weight:600}#done.partial{background:#fff8e1;border-color:#b26a00;color:#6d4100}
#row2{display:flex;flex-wrap:wrap;gap:0 18px;align-items:center}#filters label{margin-right:12px;cursor:pointer}
.risk{font-size:12px;color:#8a1c1c;background:#fdecea;border-radius:4px;padding:0 6px}
.claim.decided{text-decoration:underline 3px #1565c0;text-underline-offset:3px}
.claim.overridden{text-decoration-color:#6a1b9a}
#decide{border:1px solid #cfd8e3;background:#f3f7fb;border-radius:6px;padding:8px;margin-bottom:10px}
#decide button{margin:2px 4px 2px 0;font-size:13px;cursor:pointer}#decide button.on{outline:2px solid #1565c0}
#decide textarea{width:100%;box-sizing:border-box;min-height:48px;margin-top:6px;font:inherit;font-size:13px}
#decision-state{font-size:13px;margin-bottom:4px}
main{display:grid;grid-template-columns:minmax(0,3fr) minmax(300px,2fr);gap:20px;padding:16px 24px}
.answer{background:#fff;border:1px solid #ddd;border-radius:8px;padding:14px 16px;margin-bottom:16px;min-width:0}
.answer[data-complete=true]{border-color:#9ccc9f}
.answer h2{font-size:15px;margin:0 0 6px;display:flex;flex-wrap:wrap;gap:4px 10px;align-items:center;
overflow-wrap:anywhere}.card-progress{font-size:12px;font-weight:400;color:#555;margin-left:auto}
.badge{font-size:12px;font-weight:600;border-radius:4px;padding:1px 7px;color:#fff}
.PASS{background:#2e7d32}.WARN{background:#b26a00}.FAIL{background:#c62828}.NO_CLAIMS,.ERROR{background:#666}
.q{color:#555;font-style:italic;margin:4px 0}.text{white-space:pre-wrap}
.text,.q,.msg,.passage,.src-text,.reasons,#detail,.flag{overflow-wrap:anywhere}
.claim{cursor:pointer;border-radius:3px;padding:0 1px;border-bottom:2px solid;
scroll-margin:calc(var(--bar,100px) + 40px) 0 40px}
.claim.SUPPORTED,.swatch.SUPPORTED{background:#e3f3e4;border-color:#2e7d32}
.claim.CONTRADICTED,.swatch.CONTRADICTED{background:#fde2e2;border-color:#c62828}
.claim.UNSUPPORTED,.swatch.UNSUPPORTED{background:#fff1d6;border-color:#b26a00}
.claim.ERROR,.swatch.ERROR{background:#eee;border-color:#666}
.claim.selected{outline:2px solid #1565c0}
#detail{position:sticky;top:calc(var(--bar,100px) + 12px);align-self:start;background:#fff;border:1px solid #ddd;
border-radius:8px;padding:14px 16px;max-height:calc(100vh - var(--bar,100px) - 28px);overflow:auto;min-width:0}
#detail h3{margin:0 0 8px;font-size:15px}#detail dl{display:grid;grid-template-columns:fit-content(38%) minmax(60%,1fr);gap:2px 12px;margin:0}
#detail dt{color:#666;overflow-wrap:normal}.who{font-size:12px;color:#666}#detail dd{margin:0;min-width:0}.passage{white-space:pre-wrap;background:#fafafa;
border:1px solid #eee;padding:8px;font-size:13px;margin-top:6px}mark{background:#ffe066}
.flag{color:#c62828;font-weight:600}.cite-decide{margin-top:6px;font-size:13px}.cite-wrong{font-size:12px}
.hidden{display:none}.reasons{font-size:13px;color:#333;margin:2px 0 6px;padding-left:18px}
.conversation{margin:6px 0;font-size:13px}.msg{border-left:3px solid #ccc;padding:2px 8px;margin:4px 0;
white-space:pre-wrap}.msg .role{font-weight:600;color:#555;margin-right:6px}.msg.evidence{border-color:#2e7d32;
background:#f3faf3}.msg.answer-turn{border-color:#1565c0}.msg.cited{outline:2px solid #f9a825;background:#fff8e1}
.msg .part{border:1px dashed #bbb;padding:2px 6px;margin-top:3px}.msg .part.cited{outline:2px solid #f9a825}
.clamped{max-height:12em;overflow:hidden;-webkit-mask-image:linear-gradient(#000 60%,transparent);
mask-image:linear-gradient(#000 60%,transparent)}
.toggle{display:block;font-size:12px;border:0;background:none;color:#1565c0;cursor:pointer;padding:2px 0}
.crows{margin:10px 0 4px;font-size:13px;border-top:1px solid #eee;padding-top:6px}
.crows-head,.sources-head{font-size:12px;font-weight:600;color:#555;text-transform:uppercase;letter-spacing:.03em}
.crow{display:flex;flex-wrap:wrap;gap:2px 6px;align-items:baseline;padding:2px 4px;border-radius:4px}
.crow.on{background:#eaf2fb}.crow .ctext{flex:1 1 200px;min-width:0;overflow:hidden;text-overflow:ellipsis;
white-space:nowrap;cursor:pointer}
.lab{font-size:11px;font-weight:600;border-radius:3px;padding:0 5px;color:#fff;flex:none}
.lab.SUPPORTED{background:#2e7d32}.lab.CONTRADICTED{background:#c62828}.lab.UNSUPPORTED{background:#b26a00}
.lab.ERROR{background:#666}
.link{flex:none;font-size:12px;border:1px solid #cfd8e3;background:#fff;border-radius:10px;padding:0 8px;
cursor:pointer;max-width:100%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.link.quote{border-color:#d4a000;background:#fff7d1}.link.entail{border-color:#7cb342}
.link.contra{border-color:#e57373}.nolink{font-size:12px}
.sources{margin-top:10px}.src{border:1px solid #e4e4e4;border-radius:6px;margin:6px 0;padding:6px 8px;
background:#fcfcfb}.src-name{font-size:12px;color:#555;font-weight:600;overflow-wrap:anywhere}
.src-text{white-space:pre-wrap;font-size:13px}
mark.hl{background:none;color:inherit;border-radius:2px;scroll-margin:calc(var(--bar,100px) + 60px) 0 60px}
mark.hl.entail{background:#e8f5e9;box-shadow:inset 0 -2px 0 #9ccc65}
mark.hl.contra{background:#fdecea;box-shadow:inset 0 -2px 0 #e57373}
mark.hl.quote{background:#ffe27a;box-shadow:inset 0 -2px 0 #d4a000}
mark.hl.active{box-shadow:inset 0 -3px 0 #1565c0}
mark.hl.flash{animation:gjflash 1.6s ease-out}
@keyframes gjflash{0%,50%{background:#ff9800;color:#000}100%{}}
mark.hit{background:#81d4fa;color:inherit;outline:1px solid #0277bd}mark.hit.cur{background:#29b6f6}
.search{display:flex;flex-wrap:wrap;gap:4px 8px;align-items:center;margin:10px 0 2px;font-size:13px}
.search input{flex:0 1 320px;min-width:0;font:inherit}.search .hits{color:#555}
@media (max-width:900px){main{grid-template-columns:minmax(0,1fr)}#detail{position:static;max-height:none}}
"""

REVIEW_JS = r"""
const data = JSON.parse(document.getElementById('gj-data').textContent);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text); return e; };
const fmt = x => (x === null || x === undefined) ? '-' : Number(x).toFixed(3);
// a claim whose NLI check failed (the model raised, a non-finite score, too long): its report's numbers are the
// defaults (0), not a score: shown as a failed check, never as "entailment 0.000"
const nliFailed = cv => !!(cv.nli && cv.nli.error);
const NLI_FAILED = 'NLI check failed';
const LABELS = ['SUPPORTED', 'CONTRADICTED', 'UNSUPPORTED'];
// direction overrides, embeddings, isolates and invisible characters (html.py's _HIDDEN)
const HIDDEN = /[\u202a-\u202e\u2066-\u2069\u200b\u2060-\u2064\ufeff\u{e0000}-\u{e007f}]/gu;
const LINKS = {quote: 'quote', entail: 'NLI support passage', contra: 'NLI contradiction passage'};
const LIMITS = {answer: 1500, source: 1200, message: 900, reasons: 600, reason: 400, question: 500};
const STORE = 'groundjudge-review:' + data.run;
const items = [];  // every claim on the page, in page order: {rep, ri, ci, cv, card, node, row, key}
// served by `groundjudge review serve`: decisions live in the service's database (groundjudge/serve/page.py)
const SERVER = window.groundjudgeServer || null;
let current = -1; let decisions = {}; let storageOk = true; let auto = true;
if (SERVER) decisions = SERVER.decisions();
else try { decisions = JSON.parse(localStorage.getItem(STORE) || '{}') || {}; } catch (e) { storageOk = false; }
// a reviewer's name as the page keeps and exports it: no control, direction or invisible characters (a name that
// reads otherwise than it is, or two names that look alike), spaces collapsed, at most NAME_MAX characters
const NAME_MAX = 80;
const cleanName = s => Array.from(String(s || '').replace(HIDDEN, '').replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ')
  .replace(/\s+/g, ' ').trim()).slice(0, NAME_MAX).join('').trim();
let reviewer = SERVER ? SERVER.me : '';
try { if (!SERVER) reviewer = cleanName(localStorage.getItem('groundjudge-reviewer'));
  auto = localStorage.getItem('groundjudge-autoadvance') !== 'off'; } catch (e) { storageOk = false; }
const isDecided = it => !!(decisions[it.key] && decisions[it.key].label);
// what the export holds of a claim: a verdict, a note, a citation choice, or a cleared verdict (label null: it
// withdraws the verdict an earlier export of this reviewer gave), each with or without the others
const hasDecision = d => !!(d && (d.label || (d.note && d.note.trim()) || d.citation || d.cleared_at));
// a change to a claim's decision is the reviewer's in the box now (decisions made before a name was typed take
// the name at export: exportJsonl)
function touch(d) { if (reviewer) d.reviewer = reviewer; else delete d.reviewer; return d; }
function readStore() {  // the decisions stored for this run (null: none readable)
  let all = null; try { all = JSON.parse(localStorage.getItem(STORE) || '{}'); } catch (e) { return null; }
  return all && typeof all === 'object' && !Array.isArray(all) ? all : null;
}
function save(it, later) {  // it: the claim whose decision changed (the service stores that one)
  if (SERVER) { if (it) SERVER.save(it, decisions[it.key] || {}, later); }
  else try {
    // this claim's decision only, into what is stored now: another tab of this page (or the same page opened from
    // another path: file:// pages share one storage) keeps its own decisions instead of losing them to this tab's
    const all = readStore() || Object.assign({}, decisions);  // unreadable: this tab's decisions, as before
    if (!it) Object.assign(all, decisions); else if (decisions[it.key]) all[it.key] = decisions[it.key]; else delete all[it.key];
    localStorage.setItem(STORE, JSON.stringify(all)); decisions = all; storageOk = true;
  } catch (e) { storageOk = false; }
  progress();
}
function progress() {
  const decided = items.filter(isDecided).length;
  // the service's page holds a window of the reviewer's queue: its counts add the finished answers it does not hold
  const hid = SERVER ? SERVER.hidden : {answers: 0, claims: 0};
  const claimsAll = items.length + hid.claims; const decidedAll = decided + hid.claims;
  document.getElementById('progress').textContent = decidedAll + ' of ' + claimsAll + ' claims decided';
  const bar = document.getElementById('progress-bar'); bar.max = Math.max(1, claimsAll); bar.value = decidedAll;
  let done = hid.answers; let withClaims = hid.answers;
  document.querySelectorAll('.answer').forEach(card => {
    const mine = card.gjItems || []; const n = mine.filter(isDecided).length;
    if (mine.length) withClaims += 1; if (mine.length && n === mine.length) done += 1;
    card.dataset.complete = String(mine.length > 0 && n === mine.length);  // a data attribute: the class stays 'answer'
    const p = card.querySelector('.card-progress'); if (p) p.textContent = n + ' of ' + mine.length + ' decided';
  });
  document.getElementById('progress-answers').textContent = done + ' of ' + withClaims + ' answers done';
  document.getElementById('queue-decided').textContent = 'Decided so far: ' + decidedAll + ' of ' + claimsAll +
    ' claims, ' + done + ' of ' + withClaims + ' answers.';
  const left = items.filter(it => !isDecided(it)); const shown = left.filter(it => visible(it));
  const sign = document.getElementById('done');
  sign.classList.toggle('hidden', !(items.length && !shown.length));
  sign.classList.toggle('partial', left.length > 0);
  document.getElementById('done-text').textContent = left.length
    ? 'No undecided claim in the answers shown: ' + left.length + ' more in answers the filters hide.'
    : SERVER ? 'End of your queue: all ' + claimsAll + ' claims are decided. Take more answers with "More answers".'
    : 'End of the queue: all ' + items.length + ' claims are decided. Export your decisions.';
  const holds = document.getElementById('export-holds'); const kept = items.filter(it => hasDecision(decisions[it.key]));
  const alone = kept.filter(it => !isDecided(it) && !hasDecision(Object.assign({}, decisions[it.key], {cleared_at: null}))).length;
  const bare = kept.length - decided - alone;  // notes and citation choices on claims without a verdict
  holds.textContent = 'the export holds ' + decided + ' verdict' + (decided === 1 ? '' : 's') +
    (bare ? ' and ' + bare + ' note' + (bare === 1 ? '' : 's') + ' or citation choice' + (bare === 1 ? '' : 's') +
      ' without a verdict (label null: no label for metrics, calibrate or tune)' : '') +
    (alone ? ' and ' + alone + ' cleared verdict' + (alone === 1 ? '' : 's') +
      ' (label null: takes back the verdict an earlier export gave)' : '');
  // who the lines name: a decision made before a name was typed takes the name in the box
  const names = {}; kept.forEach(it => { const n = decisions[it.key].reviewer || reviewer; names[n] = (names[n] || 0) + 1; });
  const named = Object.keys(names).filter(n => n); const asEl = document.getElementById('export-as');
  asEl.textContent = !kept.length ? '' : named.length === 1 && !names[''] ? 'as ' + named[0]
    : named.length ? 'as ' + named.map(n => n + ' (' + names[n] + ')').join(', ') +
      (names[''] ? ' and ' + names[''] + ' without a name' : '')
    : 'without a reviewer name';
  asEl.classList.toggle('warn', !!names['']);
  document.getElementById('reviewer').classList.toggle('warn', !SERVER && !reviewer);
  const st = document.getElementById('storage');
  st.title = 'run ' + data.run;
  if (SERVER) { SERVER.status(st); return; }
  st.textContent = storageOk ? 'kept in this browser'
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
  d.label = label; d.decided_at = new Date().toISOString(); delete d.cleared_at; touch(d);
  decisions[it.key] = d; save(it); mark(it); decisionPanel(it);
  if (auto) nextUndecided();
}
// a claim's citation (README "Citations"): what its markers are worth, and a reviewer's decision on it
const CITE_SAYS = {CITED_SUPPORTS: 'a cited source supports it', UNCITED: 'it cites nothing',
  OTHER_SUPPORTS: 'wrong citation: only a source it does not cite supports it',
  NOT_SUPPORTED: 'wrong citation: the sources it cites do not support it'};
const wrongCite = cv => cv.citation === 'OTHER_SUPPORTS' || cv.citation === 'NOT_SUPPORTED';
const refs = ns => ns.map(n => '[' + n + ']').join(' ');
function citeText(cv) {
  const cited = cv.cited || [];
  const by = [...new Set((cv.quotes || []).filter(q => q.verified).map(q => q.doc + 1))].filter(n => !cited.includes(n));
  return (cited.length ? 'cites ' + refs(cited) + ': ' : '') + (CITE_SAYS[cv.citation] || cv.citation) +
    (cv.citation === 'OTHER_SUPPORTS' && by.length ? ' (the judge quoted ' + refs(by) + ')' : '');
}
function decideCitation(value) {
  if (current < 0) return; const it = items[current];
  const d = decisions[it.key] || {note: ''};
  if (d.citation === value) delete d.citation; else d.citation = value; touch(d);
  if (!hasDecision(d)) delete decisions[it.key]; else decisions[it.key] = d;
  save(it); decisionPanel(it);
}
function accept() { if (current >= 0 && LABELS.includes(items[current].cv.label)) decide(items[current].cv.label); }
function clearDecision() {
  if (current < 0) return; const it = items[current]; const d = decisions[it.key];
  // a cleared verdict stays as a withdrawal: the export writes its line with label null, which takes back the
  // verdict an earlier export gave (readers keep each reviewer's latest line); dropping the line kept it counting
  if (d) { if (d.label) d.cleared_at = new Date().toISOString(); delete d.label; delete d.decided_at; touch(d);
    if (!hasDecision(d)) delete decisions[it.key]; }
  save(it); mark(it); decisionPanel(it);
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
  if (it.cv.citation && it.cv.citation !== 'UNCITED') {  // exported with the verdict on the claim
    const cite = el('div', 'cite-decide', 'Citation (' + citeText(it.cv) + '): '); cite.id = 'cite-decide';
    [['RIGHT', 'the cited source supports it'], ['WRONG', 'wrong citation']].forEach(([v, t]) => {
      const b = el('button', d.citation === v ? 'on' : null, t); b.dataset.citation = v;
      b.onclick = () => decideCitation(v); cite.append(b); });
    box.append(cite);
  }
  const note = el('textarea'); note.id = 'note'; note.placeholder = 'Note (n to type here, Esc to leave)';
  note.value = d.note || '';
  if (SERVER && SERVER.maxNote) note.maxLength = SERVER.maxNote;  // the service refuses a longer note, and the verdict with it
  note.oninput = () => { const r = decisions[it.key] || {}; r.note = note.value; decisions[it.key] = touch(r); save(it, true); };
  box.append(note);
}
// long texts: cut to a few lines, with a toggle
function clamp(node, limit, what) {
  const n = node.textContent.length; if (n <= limit) return;
  node.classList.add('clamped');
  const b = el('button', 'toggle'); b.type = 'button';
  node.gjLabel = () => { const shut = node.classList.contains('clamped');
    b.textContent = shut ? 'Show all ' + what + ' (' + n.toLocaleString('en') + ' characters)' : 'Show less';
    b.setAttribute('aria-expanded', String(!shut)); };
  b.onclick = () => { node.classList.toggle('clamped'); node.gjLabel(); };
  node.after(b); node.gjLabel();
}
function cutOff(node, box) {  // node lies in the part of a cut box that is hidden or faded
  const r = node.getBoundingClientRect(); const b = box.getBoundingClientRect();
  return r.bottom > b.top + 0.6 * b.height || r.top < b.top;
}
function openAround(node, force) {  // open what hides node: cut boxes (all of them with force), closed details
  for (let p = node; p && p !== document.body; p = p.parentElement) {
    if (p.classList && p.classList.contains('clamped') && (force || cutOff(node, p))) {
      p.classList.remove('clamped'); if (p.gjLabel) p.gjLabel(); }
    if (p.tagName === 'DETAILS' && !p.open) p.open = true;
  }
}
// the evidence of a claim in its sources: reveal, flash, keep marked while the claim is selected
function marksOf(card, ref) { return [...card.querySelectorAll('mark.hl')].filter(m => m.dataset.hl.split(' ').includes(ref)); }
function reveal(card, ref) {
  const marks = marksOf(card, ref); if (!marks.length) return;
  marks.forEach(openAround);
  marks[0].scrollIntoView({block: 'center'});
  marks.forEach(m => { m.classList.remove('flash'); void m.offsetWidth; m.classList.add('flash'); });
  setTimeout(() => marks.forEach(m => m.classList.remove('flash')), 1700);
}
function linkButtons(it, into) {
  (data.links[it.ri][it.ci] || []).forEach(ln => {
    if (ln.kind === 'unverified') { const s = el('span', 'nolink flag', 'quote not in the sources');
      s.title = ln.text; into.append(s); return; }
    const b = el('button', 'link ' + ln.kind, LINKS[ln.kind] + ' · ' + docName(it.rep, ln.doc, true)); b.type = 'button';
    b.dataset.ref = ln.ref; b.title = 'show it in the source';
    b.onclick = ev => { ev.stopPropagation(); select(it.idx, false); reveal(it.card, ln.ref); }; into.append(b);
  });
}
function select(i, scroll) {
  if (i < 0 || i >= items.length) return; current = i; const it = items[i];
  openAround(it.node); showClaim(it); if (scroll !== false) it.node.scrollIntoView({block: 'nearest'});
}
function visible(it) { return !it.card.classList.contains('hidden'); }
function move(step) {
  for (let i = current + step; i >= 0 && i < items.length; i += step) if (visible(items[i])) { select(i); return; }
}
function nextUndecided() {
  const n = items.length;
  for (let k = 1; k <= n; k++) { const i = (current + k + n) % n;
    if (visible(items[i]) && !isDecided(items[i])) { select(i); return true; } }
  progress(); const sign = document.getElementById('done'); if (!sign.classList.contains('hidden')) sign.scrollIntoView({block: 'nearest'});
  return false;
}
function showClaim(it) {
  const rep = it.rep; const cv = it.cv;
  document.querySelectorAll('.claim.selected').forEach(n => n.classList.remove('selected'));
  document.querySelectorAll('.crow.on').forEach(n => n.classList.remove('on'));
  document.querySelectorAll('mark.hl.active').forEach(n => n.classList.remove('active'));
  it.node.classList.add('selected'); it.row.classList.add('on');
  (data.links[it.ri][it.ci] || []).forEach(ln => { if (ln.ref) marksOf(it.card, ln.ref).forEach(m => m.classList.add('active')); });
  const d = document.getElementById('detail'); d.replaceChildren();
  d.append(el('h3', null, cv.claim.text));
  const box = el('div'); box.id = 'decide'; d.append(box); decisionPanel(it);
  const dl = el('dl');
  const row = (k, v, cls) => { dl.append(el('dt', null, k)); const dd = el('dd', cls, v); dl.append(dd); return dd; };
  row('answer', rep.id); row('verdict', cv.label, 'verdict ' + cv.label); row('route', cv.route);
  if (nliFailed(cv)) row('NLI', NLI_FAILED + ': ' + cv.nli.error, 'flag nli-failed');
  else if (cv.nli) { row('entailment', fmt(cv.nli.entailment)); row('contradiction', fmt(cv.nli.contradiction));
    if (cv.nli.supported != null) row('P(supported), verdict head', fmt(cv.nli.supported));
    row('passages scored', cv.nli.passages_scored + ' of ' + cv.nli.passages_total); }
  row('contradiction checked', cv.contradiction_checked ? 'yes' : 'no', cv.contradiction_checked ? null : 'flag');
  if (cv.citation) row('citation', citeText(cv), wrongCite(cv) ? 'flag cite' : 'cite');
  const why = el('div', null, cv.reason || '-'); row('reason', '').append(why); clamp(why, LIMITS.reason, 'of the reason');
  const sj = cv.second_judge;  // README "Second judge": shown beside the first verdict, never scored
  if (sj) {
    // the model in the value: as a label it widened the label column until the values wrapped letter by letter
    const model = rep.second_judge && rep.second_judge.model ? el('div', 'who', rep.second_judge.model) : null;
    const said = sj.error ? 'no verdict: ' + sj.error : sj.label + (sj.reason ? ': ' + sj.reason : '');
    const two = el('div', null, (cv.judges_disagree ? 'disagrees: ' : '') + said);
    const cell = row('second judge', '', cv.judges_disagree || sj.error ? 'flag' : null);
    if (model) cell.append(model);
    cell.append(two);
    clamp(two, LIMITS.reason, "of the second judge's reason");
  }
  const hidden = [...new Set((cv.claim.text.match(HIDDEN) || []).map(ch => 'U+' + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')))];
  if (hidden.length) row('hidden characters', hidden.join(' ') + ': this claim does not read as the checker read it', 'flag');
  row('flags', (cv.flags || []).join(', ') || '-', cv.flags.length ? 'flag' : null);
  if (cv.error) row('error', cv.error, 'flag');
  const where = el('div', 'crow'); linkButtons(it, where);
  if (where.childNodes.length) row('in the sources', '').append(where);
  d.append(dl);
  const quotes = cv.quotes || [];
  const docs = [];
  if (!quotes.length && cv.nli && !nliFailed(cv) && cv.nli.entailment_passage) {
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
function docName(rep, doc, short) {
  const src = rep.sources && rep.sources[doc];
  const id = rep.context_ids && rep.context_ids[doc] ? ' [' + rep.context_ids[doc] + ']' : '';
  if (!src) return 'source ' + (doc + 1) + id;
  const where = src.message === null || src.message === undefined ? 'contexts[' + (src.part || 0) + ']'
    : 'messages[' + src.message + ']';
  if (short) return where;
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
function sourceText(ri, doc) {  // the source's escaped, highlighted HTML, written by the page (page_sources.py)
  return document.getElementById('gj-src-' + ri + '-' + doc) || el('div', 'src-text');
}
function conversation(rep, ri, shown) {
  const box = el('details', 'conversation'); box.open = true;
  box.append(el('summary', null, 'Conversation (' + rep.conversation.length + ' messages; evidence in green)'));
  rep.conversation.forEach((m, i) => {
    const cls = 'msg' + (m.evidence ? ' evidence' : '') + (m.answer ? ' answer-turn' : '');
    const n = el('div', cls); n.dataset.msg = String(i);
    n.append(el('span', 'role', '[' + i + '] ' + m.role + (m.tool_name ? ' ' + m.tool_name : '') +
      (m.answer ? ' (the answer judged)' : '')));
    const whole = (rep.sources || []).findIndex((src, doc) => src.message === i &&
      (src.part === null || src.part === undefined) && rep.contexts[doc] === m.text);
    if (whole >= 0) { const t = sourceText(ri, whole); n.append(t); shown.add(whole); }
    else { const t = el('span', 'msg-text', m.text); n.append(t); }
    (rep.sources || []).forEach((src, doc) => { if (src.message === i && src.part !== null && src.part !== undefined) {
      const p = el('div', 'part'); p.dataset.doc = String(doc); const t = sourceText(ri, doc); p.append(t);
      n.append(p); shown.add(doc); clamp(t, LIMITS.source, 'of this part'); } });
    box.append(n);
    const first = n.querySelector('.src-text, .msg-text'); if (first) clamp(first, LIMITS.message, 'of this message');
  });
  return box;
}
function sources(rep, ri, shown) {
  const docs = rep.contexts.map((_, d) => d).filter(d => !shown.has(d)); if (!docs.length) return null;
  const box = el('div', 'sources');
  box.append(el('div', 'sources-head', (shown.size ? 'Other sources' : 'Sources') + ' (' + docs.length + ')'));
  docs.forEach(doc => { const s = el('div', 'src'); s.dataset.doc = String(doc);
    s.append(el('div', 'src-name', docName(rep, doc) + ' · ' + rep.contexts[doc].length.toLocaleString('en') + ' characters'));
    const t = sourceText(ri, doc); s.append(t); box.append(s); clamp(t, LIMITS.source, 'of this source'); });
  return box;
}
// search within one card's sources: mark every match, open the collapsed sources that hold one
function unmarkHits(card) {
  card.querySelectorAll('mark.hit').forEach(m => { const p = m.parentNode; m.replaceWith(...m.childNodes); p.normalize(); });
}
function markHits(block, re, room, base) {  // each match's pieces share data-n (base + its number)
  const walker = document.createTreeWalker(block, NodeFilter.SHOW_TEXT); const nodes = []; let all = '';
  for (let n = walker.nextNode(); n; n = walker.nextNode()) { nodes.push([n, all.length]); all += n.data; }
  const hits = []; re.lastIndex = 0; let m;
  while (hits.length < room && (m = re.exec(all)) !== null) {
    if (!m[0].length) { re.lastIndex += 1; continue; } hits.push([m.index, m.index + m[0].length]); }
  for (let h = hits.length - 1; h >= 0; h--) { const [s, e] = hits[h];  // last first: earlier offsets stay valid
    for (let k = nodes.length - 1; k >= 0; k--) { const [node, at] = nodes[k];
      const a = Math.max(s, at); const b = Math.min(e, at + node.data.length); if (a >= b) continue;
      node.splitText(b - at); const mid = node.splitText(a - at); const w = el('mark', 'hit'); w.dataset.n = String(base + h);
      mid.replaceWith(w); w.append(mid); } }
  return hits.length;
}
function search(card, query, info) {
  unmarkHits(card); info.textContent = '';
  if (!query) return;
  const re = new RegExp(query.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gi');
  let total = 0; let where = 0;
  card.querySelectorAll('.src-text').forEach(block => { const k = markHits(block, re, 1000 - total, total);
    if (k) { total += k; where += 1; openAround(block, true); } });
  info.textContent = total ? total + (total === 1 ? ' match' : ' matches') + ' in ' + where +
    (where === 1 ? ' source' : ' sources') : 'not in the sources';
  showHit(card, 0);
}
function showHit(card, n) {  // outline every piece of match n, and bring it into view
  const pieces = [...card.querySelectorAll('mark.hit')]; pieces.forEach(h => h.classList.toggle('cur', h.dataset.n === String(n)));
  const first = pieces.find(h => h.dataset.n === String(n)); if (first) first.scrollIntoView({block: 'center'});
}
function nextHit(card) {
  const ns = [...new Set([...card.querySelectorAll('mark.hit')].map(h => Number(h.dataset.n)))].sort((a, b) => a - b);
  if (!ns.length) return; const cur = card.querySelector('mark.hit.cur');
  const at = cur ? ns.indexOf(Number(cur.dataset.n)) : -1; showHit(card, ns[(at + 1) % ns.length]);
}
function searchBox(rep, card) {
  const box = el('div', 'search'); const input = el('input'); input.type = 'search';
  input.placeholder = 'Search this answer\'s sources (/)'; input.setAttribute('aria-label', 'search the sources of ' + rep.id);
  const info = el('span', 'hits');
  input.oninput = () => search(card, input.value, info);
  input.onkeydown = ev => { if (ev.key === 'Enter') { ev.preventDefault(); nextHit(card); } };
  box.append(input); box.append(info); return box;
}
function passage(rep, doc, from, to, ms, me) {
  // offsets count code points (as Python does), so the text is cut as an array of code points
  const text = Array.from(rep.contexts[doc] || ''); const box = el('div', 'passage'); const cut = (a, b) => text.slice(a, b).join('');
  from = Math.max(0, from); to = Math.min(text.length, to);
  if (ms === null) { box.textContent = cut(from, to); return box; }
  box.append(document.createTextNode((from > 0 ? '…' : '') + cut(from, ms)));
  box.append(el('mark', null, cut(ms, me)));
  box.append(document.createTextNode(cut(me, to) + (to < text.length ? '…' : '')));
  return box;
}
function claimNode(it, text) {
  const cv = it.cv; const n = el('span', 'claim ' + cv.label, text); n.dataset.label = cv.label; n.dataset.claim = cv.claim.id;
  n.title = cv.label + (nliFailed(cv) ? ' (' + NLI_FAILED + ')' : '') + ': ' + cv.claim.text; n.dataset.idx = String(it.idx); it.node = n;
  n.onclick = () => select(it.idx); return n;
}
function render() {
  const list = document.getElementById('answers');
  data.reports.forEach((rep, ri) => {
    const card = el('section', 'answer'); card.dataset.verdict = rep.verdict; card.id = 'answer-' + rep.id;
    card.dataset.errors = ' ' + rep.claims.map(c => c.error_type).filter(Boolean).join(' ') + ' ';
    const h = el('h2'); h.append(el('span', 'badge ' + rep.verdict, rep.verdict)); h.append(el('span', null, rep.id));
    const s = rep.scores;
    h.append(el('span', 'scores', 'combined ' + fmt(s.combined) + ' · claims ' + fmt(s.claims) + ' · coverage ' + fmt(s.coverage)));
    // why it is here; the verdict and the combined score are shown once, above
    (data.risk[ri] || []).filter(r => r !== rep.verdict && !r.startsWith('combined '))
      .forEach(r => h.append(el('span', 'risk', r)));
    if (rep.claims.length) h.append(el('span', 'card-progress'));
    card.append(h);
    const why = rep.verdict_reasons || [];
    if (why.length) { const ul = el('ul', 'reasons'); ul.title = 'why ' + rep.verdict;
      why.forEach(r => ul.append(el('li', null, r))); card.append(ul); clamp(ul, LIMITS.reasons, 'reasons'); }
    if (rep.question) { const q = el('div', 'q', rep.question); card.append(q); clamp(q, LIMITS.question, 'of the question'); }
    const mine = rep.claims.map((cv, ci) => { const it = {rep: rep, ri: ri, ci: ci, cv: cv, card: card, node: null,
      row: null, key: JSON.stringify([rep.id, cv.claim.id])}; return it; }); card.gjItems = mine;
    // a span's offsets count code points (as Python does): the answer is cut as an array of code points
    const text = rep.answer || ''; const points = Array.from(text); const cut = (a, b) => points.slice(a, b).join('');
    const body = el('div', 'text');
    const spans = mine.filter(it => it.cv.claim.span).sort((a, b) => a.cv.claim.span.start - b.cv.claim.span.start);
    let pos = 0;
    spans.forEach(it => { const sp = it.cv.claim.span; if (sp.start < pos) return;
      it.idx = items.length; items.push(it);
      body.append(document.createTextNode(cut(pos, sp.start)));
      body.append(claimNode(it, cut(sp.start, sp.end))); pos = sp.end; });
    body.append(document.createTextNode(cut(pos)));
    if (text) { card.append(body); clamp(body, LIMITS.answer, 'of the answer'); }
    if (mine.length) {
      const rows = el('div', 'crows'); rows.append(el('div', 'crows-head', 'Claims and where their evidence is'));
      mine.forEach(it => {
        const r = el('div', 'crow'); r.dataset.claim = it.cv.claim.id; it.row = r;
        r.append(el('span', 'lab ' + it.cv.label, it.cv.label));
        let t;
        if (it.node) { t = el('span', 'ctext', it.cv.claim.text); t.onclick = () => select(it.idx); }
        else { it.idx = items.length; items.push(it); t = claimNode(it, it.cv.claim.text); t.classList.add('ctext'); }
        t.title = it.cv.claim.text; r.append(t);
        if (nliFailed(it.cv)) { const w = el('span', 'flag nli-failed', NLI_FAILED); w.title = it.cv.nli.error; r.append(w); }
        if (wrongCite(it.cv)) { const w = el('span', 'flag cite-wrong', 'wrong citation' +
          (it.cv.cited && it.cv.cited.length ? ' ' + refs(it.cv.cited) : '')); w.title = citeText(it.cv); r.append(w); }
        linkButtons(it, r); rows.append(r);
      });
      card.append(rows);
    }
    mine.forEach(mark);
    const shown = new Set();
    if (rep.contexts.length) card.append(searchBox(rep, card));
    if (rep.conversation) card.append(conversation(rep, ri, shown));
    const box = sources(rep, ri, shown); if (box) card.append(box);
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
  const who = document.getElementById('reviewer'); who.value = reviewer; who.readOnly = !!SERVER;
  if (!SERVER) { who.maxLength = NAME_MAX + 20; who.placeholder = 'your name';
    who.oninput = () => { reviewer = cleanName(who.value); try { localStorage.setItem('groundjudge-reviewer', reviewer); }
      catch (e) { storageOk = false; } if (reviewer) document.getElementById('name-ask').classList.add('hidden'); progress(); };
    who.onchange = () => { who.value = reviewer; };
    who.onkeydown = ev => { if (ev.key === 'Enter' && reviewer && !document.getElementById('name-ask').classList.contains('hidden')) download(); };
    document.getElementById('name-anon').onclick = () => download(true);
    // another tab of this page: its decisions and name, here too
    window.addEventListener('storage', ev => {
      if (ev.key === 'groundjudge-reviewer' && document.activeElement !== who) { reviewer = cleanName(ev.newValue); who.value = reviewer; }
      if (ev.key === STORE || ev.key === null) { decisions = readStore() || decisions; items.forEach(mark);
        const note = document.getElementById('note');
        if (current >= 0 && document.activeElement !== note) decisionPanel(items[current]); }
      progress(); });
  }
  const adv = document.getElementById('autoadvance'); adv.checked = auto;
  adv.onchange = () => { auto = adv.checked; try { localStorage.setItem('groundjudge-autoadvance', auto ? 'on' : 'off'); }
    catch (e) { storageOk = false; progress(); } };
  document.getElementById('export').onclick = () => download(); document.getElementById('done-export').onclick = () => download();
  progress();
}
function applyFilters() {
  const on = new Set([...document.querySelectorAll('#filters input:checked')].map(b => b.value));
  const sel = document.getElementById('error-type'); const kind = sel ? sel.value : '';
  document.querySelectorAll('.answer').forEach(c => c.classList.toggle('hidden', !on.has(c.dataset.verdict) ||
    (kind !== '' && !c.dataset.errors.includes(' ' + kind + ' '))));
  progress();
}
function exportJsonl() {  // every claim the reviewer decided, noted or chose a citation for; no verdict: label null
  return items.filter(it => hasDecision(decisions[it.key])).map(it => {
    const d = decisions[it.key];
    const line = {id: it.rep.id, claim_id: it.cv.claim.id, claim: it.cv.claim.text, label: d.label || null,
      groundjudge_label: it.cv.label, route: it.cv.route, note: d.note || ''};
    const who = d.reviewer || reviewer; if (who) line.reviewer = who;
    if (d.citation) { line.citation = d.citation; line.groundjudge_citation = it.cv.citation || null; }
    // a withdrawal carries when it was made, so that a file put together with older exports keeps it latest
    if (d.label) line.decided_at = d.decided_at; else if (d.cleared_at) line.decided_at = d.cleared_at;
    line.run = data.run;
    return JSON.stringify(line) + '\n';
  }).join('');
}
function download(anonymous) {
  // an export without a name is read as one anonymous reviewer's, the latest decision counting: two people's files put
  // together would hide their disagreements. Ask for the name first; "Export without a name" is one click more.
  const ask = document.getElementById('name-ask');
  if (!SERVER && anonymous !== true && items.some(it => hasDecision(decisions[it.key]) && !decisions[it.key].reviewer) &&
      !reviewer) {
    ask.classList.remove('hidden'); const who = document.getElementById('reviewer'); who.focus(); return false; }
  ask.classList.add('hidden');
  const blob = new Blob([exportJsonl()], {type: 'application/x-ndjson'});
  const url = URL.createObjectURL(blob); const a = el('a'); a.href = url;
  a.download = 'groundjudge-reviews-' + data.run + '.jsonl'; document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000); return true;
}
const TYPING = ['checkbox', 'radio', 'button', 'submit', 'reset'];
document.addEventListener('keydown', ev => {
  const t = ev.target;
  if (t && (t.tagName === 'TEXTAREA' || (t.tagName === 'INPUT' && !TYPING.includes(t.type)))) {
    if (ev.key === 'Escape') t.blur(); return; }
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const k = ev.key;
  if (k === 'j' || k === 'ArrowDown' || k === 'ArrowRight') move(1);
  else if (k === 'k' || k === 'ArrowUp' || k === 'ArrowLeft') move(-1);
  else if (k === '1' || k === '2' || k === '3') decide(LABELS[Number(k) - 1]);
  else if (k === 'a') accept();
  else if (k === 'u') nextUndecided();
  else if (k === 'n') { const n = document.getElementById('note'); if (n) n.focus(); }
  else if (k === '/') { const card = current >= 0 ? items[current].card : document.querySelector('.answer:not(.hidden)');
    const box = card && card.querySelector('.search input'); if (box) { box.scrollIntoView({block: 'center'}); box.focus(); } }
  else return;
  ev.preventDefault();
});
const barHeight = () => document.documentElement.style.setProperty('--bar', document.getElementById('bar').offsetHeight + 'px');
render(); barHeight(); window.addEventListener('resize', barHeight);
window.groundjudgeReview = {run: data.run, exportJsonl: exportJsonl, download: download, nextUndecided: nextUndecided,
  current: () => current < 0 ? null : {id: items[current].rep.id, claim_id: items[current].cv.claim.id}};
const firstOpen = items.findIndex(it => !isDecided(it));
if (items.length) select(firstOpen < 0 ? 0 : firstOpen, firstOpen > 0);  // a fresh queue opens at the top
"""
