"""The service's pages: the review page of :func:`groundjudge.review.html.render_html` with the reviewer's assigned
answers and their decisions from the database, the sign-in page, and the team page (progress per reviewer and for
the queue, and the claims reviewers disagree on, settled there by an adjudicator).

Every piece of data is escaped as the static page escapes it (:func:`groundjudge.review.html.embed_json` for data
the scripts read, :func:`groundjudge.review.page_sources.html_text` for text in the markup); the scripts build
their nodes with ``textContent``. Each page's scripts carry a nonce that its Content-Security-Policy names.
"""

# ruff: noqa: E501  (the pages' inline JavaScript and CSS)
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundjudge.models import AnswerReport
from groundjudge.review.html import embed_json, render_html
from groundjudge.review.metrics import Review
from groundjudge.review.page_sources import html_text
from groundjudge.serve.store import MAX_NOTE, Window

# window.groundjudgeServer, which the review page's script (review/page_assets.py) uses when it is there: decisions
# from the database, each change posted to /api/decisions (with the session's CSRF token and a request id, so a
# retry is stored once), retried until the service acknowledges it; the status shown where the static page says
# "kept in this browser"; the team's progress in the bar.
SERVER_JS = r"""
window.groundjudgeServer = (() => {
  const cfg = JSON.parse(document.getElementById('gj-server').textContent);
  const pending = new Map(); let problem = ''; let stored = 0;
  const rid = () => Array.from(crypto.getRandomValues(new Uint8Array(16)), b => b.toString(16).padStart(2, '0')).join('');
  function decisions() {
    const out = {};
    cfg.decisions.forEach(d => { const r = {note: d.note || ''}; if (d.label) { r.label = d.label; r.decided_at = d.decided_at; r.reviewer = cfg.me; }
      if (d.citation) r.citation = d.citation; out[JSON.stringify([d.id, d.claim_id])] = r; });
    return out;
  }
  function status(st) {
    if (!st) st = document.getElementById('storage'); if (!st) return;
    const n = pending.size;
    st.textContent = problem ? 'NOT SAVED (' + n + ' waiting): ' + problem : n ? 'saving ' + n + '…' : 'saved in the team database';
    st.className = problem ? 'warn' : ''; st.dataset.pending = String(n); st.dataset.stored = String(stored);
  }
  function send(key) {
    const p = pending.get(key); if (!p || p.inflight) return; p.inflight = true; status();
    fetch('api/decisions', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json',
      'X-CSRF-Token': cfg.csrf}, body: JSON.stringify(p.body)})
      .then(async r => {
        p.inflight = false;
        if (r.ok) { stored += 1; problem = ''; if (pending.get(key) === p) pending.delete(key); teamSoon(); }
        else if (r.status === 401) { problem = 'signed out: sign in again in another tab, then this page saves'; retry(key, p); }
        else if (r.status === 403) { await renew(key, p, r); }
        else if (r.status >= 400 && r.status < 500 && r.status !== 429) {
          let why = 'refused (' + r.status + ')'; try { why = (await r.json()).detail || why; } catch (e) {}
          problem = String(why); if (pending.get(key) === p) pending.delete(key); }
        else { problem = 'the service answered ' + r.status + ', retrying'; retry(key, p); }
        status(); const next = pending.get(key); if (next && next !== p) send(key);
      })
      .catch(() => { p.inflight = false; problem = 'the service is unreachable, retrying'; retry(key, p); status(); });
  }
  // a 403: this page's CSRF token is not the session's (signed in again, in another tab, since it loaded): take the
  // session's token if the session is this page's reviewer's, and send again; another reviewer's session saves nothing
  async function renew(key, p, r) {
    let why = 'refused (403)'; try { why = (await r.json()).detail || why; } catch (e) {}
    let me = null; try { const m = await fetch('api/me', {credentials: 'same-origin'}); me = m.ok ? await m.json() : null; } catch (e) {}
    if (me && me.name === cfg.me && me.csrf && me.csrf !== cfg.csrf) {
      cfg.csrf = me.csrf; problem = ''; document.querySelectorAll('#bar input[name=csrf]').forEach(i => { i.value = me.csrf; });
      if (pending.get(key) === p) send(key);
    } else if (me && me.name !== cfg.me) {
      problem = 'this browser is signed in as ' + me.name + ' now: sign in as ' + cfg.me + ' again, then this page saves';
      retry(key, p);
    } else if (!me) { problem = 'signed out: sign in again in another tab, then this page saves'; retry(key, p); }
    else { problem = String(why); if (pending.get(key) === p) pending.delete(key); }
  }
  function retry(key, p) { p.tries += 1; setTimeout(() => { if (pending.get(key) === p) send(key); }, Math.min(8000, 250 * 2 ** p.tries)); }
  function save(it, d, later) {
    const key = it.key; const body = {id: it.rep.id, claim_id: it.cv.claim.id, label: d.label || null, note: d.note || '',
      citation: d.citation || null, request_id: rid()};
    const prev = pending.get(key); const p = {body: body, tries: 0, inflight: false, timer: null};
    if (prev && prev.timer) clearTimeout(prev.timer);
    pending.set(key, p); status();
    if (later) p.timer = setTimeout(() => { p.timer = null; if (!(prev && prev.inflight)) send(key); }, 700);
    else if (!(prev && prev.inflight)) send(key);
  }
  function team() {
    fetch('api/team', {credentials: 'same-origin'}).then(r => r.ok ? r.json() : null).then(t => {
      const box = document.getElementById('team-progress'); if (!t || !box) return; const q = t.queue;
      box.textContent = 'Team: ' + q.claims_decided + ' of ' + q.claims + ' claims decided, ' + q.disagreements_open +
        ' disagreement' + (q.disagreements_open === 1 ? '' : 's') + ' to settle';
    }).catch(() => {});
  }
  let teamTimer = null;  // the team's numbers again, shortly after this reviewer's decisions are stored
  function teamSoon() { if (!teamTimer) teamTimer = setTimeout(() => { teamTimer = null; team(); }, 400); }
  window.addEventListener('beforeunload', ev => { if (pending.size) { ev.preventDefault(); ev.returnValue = ''; } });
  setTimeout(team, 50); setInterval(team, 15000);
  return {me: cfg.me, role: cfg.role, csrf: cfg.csrf, decisions: decisions, save: save, status: status,
    pending: () => pending.size, team: team, maxNote: cfg.max_note, hidden: cfg.hidden || {answers: 0, claims: 0}};
})();
"""

_SERVED_CSS = (
    "#team-progress{font-weight:600}#bar form{display:inline;margin:0}#bar a{color:#1565c0}#signed-in{color:#333}"
)


def _window(w: Window) -> str:
    """What the page holds of the reviewer's answers, with links to the pages of their older (and newer) finished
    ones."""
    shown = len(w.answers) - w.unfinished
    said = (
        f"Here: your {w.unfinished} unfinished answer{'s' * (w.unfinished != 1)} and {shown} of the {w.finished} you "
        f"finished, the latest first" + (f" (page {w.page + 1} of {w.pages})" if w.pages > 1 else "")
    )
    links = (f"<a id='later' href='?finished={w.page - 1}'>later finished answers</a>" if w.page else "") + (
        f"<a id='earlier' href='?finished={w.page + 1}'>earlier finished answers</a>" if w.page + 1 < w.pages else ""
    )
    return f"<span id='window'>{html_text(said)}</span>{links}"


def _queue_said(w: Window) -> str:
    """The header's line on the reviewer's queue: the whole queue's answers and claims (the page holds a window of
    it), and what the header's summary counts."""
    shown, n = len(w.answers), w.unfinished + w.finished
    said = (
        f"Your queue: {n} answer{'s' * (n != 1)}, {w.claims} claim{'s' * (w.claims != 1)}, {w.decided} decided by you "
        f"({w.unfinished} answer{'s' * (w.unfinished != 1)} unfinished, {w.finished} finished)."
    )
    held = (
        f"This page holds {shown} of the {n} answers ({w.claims - w.hidden_claims} claims): the run summary and the "
        "corrected unsupported rate below count those; the decided counts count your whole queue."
    )
    return f"<p id='queue'><b>{html_text(said)}</b> {html_text(held)}</p>"


def _bar(me: str, role: str, csrf: str, notice: str = "", window: Window | None = None) -> str:
    """The queue bar's own part on the served page: who is signed in, what the page holds of their answers (with
    links to their older finished ones), the team's progress, more work (and ``notice``, what the last ask for
    more work got, when it got none), sign out."""
    said = f"<span id='notice' class='warn' role='status'>{html_text(notice)}</span>" if notice else ""
    return (
        f"<span id='signed-in'>signed in as <b>{html_text(me)}</b> ({html_text(role)})</span>"
        f"{_window(window) if window is not None else ''}"
        "<span id='team-progress'></span><a id='team-link' href='team'>Team progress and disagreements</a>"
        f"<form method='post' action='more'><input type='hidden' name='csrf' value='{html_text(csrf)}'>"
        "<button id='more' type='submit' title='take the next answers of the team queue'>More answers</button></form>"
        f"{said}"
        f"<form method='post' action='signout'><input type='hidden' name='csrf' value='{html_text(csrf)}'>"
        "<button id='signout' type='submit'>Sign out</button></form>"
    )


def review_page(
    items: Sequence[tuple[AnswerReport, list[str]]],
    me: str,
    role: str,
    csrf: str,
    decisions: list[dict[str, Any]],
    nonce: str,
    order: str = "risk",
    only_flagged: bool = True,
    title: str = "groundjudge review",
    reviews: Sequence[Review] | None = None,
    notice: str = "",
    window: Window | None = None,
) -> str:
    """The review page of the reviewer's answers (in queue order, with why each is there), their decisions from the
    database, and the service's bar and script; ``reviews``, the team's decisions so far (one per claim), count in
    the header's corrected unsupported rate as a previous export does on the static page; ``notice``, a line for the bar
    (what the last ask for more answers got, when it got none); ``window``, what ``items`` are of the reviewer's
    answers (:func:`groundjudge.serve.store.reviewer_window`: their unfinished ones and a page of their finished
    ones), said in the bar with links to the other pages."""
    settings: dict[str, Any] = {"me": me, "role": role, "csrf": csrf, "decisions": decisions, "max_note": MAX_NOTE}
    if window is not None:  # the reviewer's finished answers this page does not hold: its counts add them
        settings["hidden"] = {"answers": window.hidden_answers, "claims": window.hidden_claims}
    before = (
        f"<script type='application/json' id='gj-server'>{embed_json(settings)}</script>"
        f"<style>{_SERVED_CSS}</style><script nonce='{nonce}'>{SERVER_JS}</script>"
    )
    page = render_html(
        [r for r, _ in items],
        title=title,
        only_flagged=only_flagged,
        order=order,
        queue_reasons=[why for _, why in items],
        bar_extra=_bar(me, role, csrf, notice, window),
        script_before=before,
        reviews=reviews,
        queue_said=_queue_said(window) if window is not None else "",
    )
    # the page's own script (the only bare <script> tag: data never holds a '<') runs under the nonce
    return page.replace("<script>", f"<script nonce='{nonce}'>")


_PLAIN_CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f4}
header{background:#20242b;color:#fff;padding:14px 24px}header h1{margin:0 0 4px;font-size:20px}header a{color:#9ecbff}
section{background:#fff;border:1px solid #ddd;border-radius:8px;margin:16px 24px;padding:12px 16px}
h2{font-size:16px;margin:0 0 8px}table{border-collapse:collapse;font-size:14px}
th,td{border:1px solid #e2e2e2;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f3f1}
td.num{text-align:right;font-variant-numeric:tabular-nums}.lab{font-size:12px;font-weight:600;border-radius:4px;
padding:0 6px;color:#fff}.SUPPORTED{background:#2e7d32}.CONTRADICTED{background:#c62828}.UNSUPPORTED{background:#b26a00}
.ERROR{background:#666}.claim{overflow-wrap:anywhere;max-width:520px}.note{color:#555;font-size:13px;overflow-wrap:anywhere}
.settle button{margin:2px 4px 2px 0;cursor:pointer}.settled{color:#1b5e20;font-weight:600}.warn{color:#c62828;font-weight:600}
form.signin{display:flex;flex-direction:column;gap:8px;max-width:420px}form.signin input{font:inherit;padding:6px}
form.signin button{font:inherit;padding:6px 12px;align-self:flex-start}
"""


def plain_page(title: str, body: str, nonce: str = "", script: str = "") -> str:
    """A small page in the review page's colours (escaped title; ``body`` is markup built with escaped data)."""
    js = f"<script nonce='{nonce}'>{script}</script>" if script else ""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{html_text(title)}</title><style>{_PLAIN_CSS}</style></head><body>"
        f"<header><h1>{html_text(title)}</h1></header>{body}{js}</body></html>"
    )


def signin_page(message: str = "") -> str:
    """The sign-in form: the token goes in the body of a POST, never in the URL."""
    said = f"<p class='warn' id='signin-error'>{html_text(message)}</p>" if message else ""
    body = (
        "<section><h2>Sign in</h2>"
        "<p>Paste the access token <code>groundjudge review add-reviewer NAME</code> printed for you.</p>"
        f"{said}<form class='signin' method='post' action='signin' autocomplete='off'>"
        "<label>Access token <input id='token' name='token' type='password' required autocomplete='off'></label>"
        "<button id='signin' type='submit'>Sign in</button></form></section>"
    )
    return plain_page("groundjudge review: sign in", body)


# the team page's script: settle a disagreement (adjudicators), then reload the page
TEAM_JS = r"""
const cfg = JSON.parse(document.getElementById('gj-team').textContent);
document.querySelectorAll('.settle button').forEach(b => b.addEventListener('click', () => {
  const row = b.closest('tr'); const say = row.querySelector('.said');
  const note = row.querySelector('textarea'); say.textContent = 'saving…';
  fetch('api/adjudications', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json',
    'X-CSRF-Token': cfg.csrf}, body: JSON.stringify({id: row.dataset.id, claim_id: row.dataset.claim,
    label: b.dataset.label, note: note ? note.value : ''})})
    .then(async r => { if (r.ok) { location.reload(); return; }
      let why = 'refused (' + r.status + ')'; try { why = (await r.json()).detail || why; } catch (e) {}
      say.textContent = String(why); say.className = 'said warn'; })
    .catch(() => { say.textContent = 'the service is unreachable'; say.className = 'said warn'; });
}));
"""

_LABELS = ("SUPPORTED", "CONTRADICTED", "UNSUPPORTED")


def _lab(label: str | None) -> str:
    return "-" if not label else f"<span class='lab {html_text(label)}'>{html_text(label)}</span>"


def team_page(
    team: dict[str, Any], disagreements: list[dict[str, Any]], me: str, role: str, csrf: str, nonce: str
) -> str:
    """The team page: progress per reviewer and for the queue, and the claims reviewers disagree on (with buttons
    to settle each one for an adjudicator)."""
    q = team["queue"]
    rows = "".join(
        f"<tr data-reviewer='{html_text(r['name'])}'><td>{html_text(r['name'])}</td><td>{html_text(r['role'])}</td>"
        f"<td class='num'>{r['answers_done']} of {r['answers_assigned']}</td>"
        f"<td class='num'>{r['claims_decided']} of {r['claims_assigned']}</td>"
        f"<td class='num'>{r['disagreements']}</td></tr>"
        for r in team["reviewers"]
    )
    agreed = (
        f"{q['claims_agreed']} of {q['claims_double_reviewed']} claims decided by two reviewers agree"
        if q["claims_double_reviewed"]
        else "no claim decided by two reviewers yet"
    )
    queue = (
        f"<section id='queue-progress'><h2>The queue</h2><p>{q['answers']} answers, {q['claims']} claims "
        f"({q['overlap_answers']} answers go to two reviewers, for agreement). Assigned: {q['slots_assigned']} of "
        f"{q['slots']} reviews. Decided: <b>{q['claims_decided']} of {q['claims']} claims</b> "
        f"({q['claims_complete']} by every reviewer they go to). {agreed}; disagreements: "
        f"<b>{q['disagreements_open']} to settle</b>, {q['disagreements_settled']} settled.</p></section>"
        "<section id='reviewers'><h2>Reviewers</h2><table><tr><th>reviewer</th><th>role</th><th>answers done</th>"
        f"<th>claims decided</th><th>disagreements</th></tr>{rows}</table></section>"
    )
    adjudicator = role == "adjudicator"
    lines = []
    for d in disagreements:
        said = "".join(
            f"<div class='decided' data-reviewer='{html_text(v['reviewer'])}'>{html_text(v['reviewer'])}: "
            f"{_lab(v['label'])}<div class='note'>{html_text(v['note'])}</div></div>"
            for v in d["decisions"]
        )
        adj = d["adjudication"]
        state = (
            f"<div class='settled'>settled: {_lab(adj['label'])} by {html_text(adj['reviewer'])}</div>"
            f"<div class='note'>{html_text(adj['note'])}</div>"
            if adj
            else "<div class='open'>open: teaches nothing until settled</div>"
        )
        settle = (
            "<td class='settle'>"
            + "".join(f"<button type='button' data-label='{x}'>{x}</button>" for x in _LABELS)
            + "<textarea placeholder='why (kept in the history)' rows='2'></textarea><span class='said'></span></td>"
            if adjudicator
            else ""
        )
        lines.append(
            f"<tr class='disagreement' data-id='{html_text(d['id'])}' data-claim='{html_text(d['claim_id'])}'>"
            f"<td>{html_text(d['id'])}</td><td class='claim'>{html_text(d['claim'])}</td>"
            f"<td>{_lab(d['groundjudge_label'])} <small>{html_text(d['route'] or '')}</small></td><td>{said}</td>"
            f"<td>{state}</td>{settle}</tr>"
        )
    head = "<th>answer</th><th>claim</th><th>groundjudge</th><th>reviewers</th><th>state</th>" + (
        "<th>settle as</th>" if adjudicator else ""
    )
    who = (
        "You are an adjudicator: your label settles a claim (the export's label for it)."
        if adjudicator
        else "An adjudicator settles these (review add-reviewer NAME --adjudicator)."
    ) + (
        " An open one has no label: the export marks it disputed, and metrics, calibrate, tune and compare leave it "
        "out until it is settled."
    )
    table = (
        f"<table id='disagreements'><tr>{head}</tr>{''.join(lines)}</table>"
        if lines
        else "<p id='no-disagreements'>No claim that reviewers disagree on.</p>"
    )
    body = (
        f"<section><a href='./'>Back to your queue</a> · signed in as <b>{html_text(me)}</b></section>{queue}"
        f"<section id='adjudication'><h2>Disagreements</h2><p>{who}</p>{table}</section>"
        f"<script type='application/json' id='gj-team'>{embed_json({'csrf': csrf})}</script>"
    )
    return plain_page("groundjudge review: the team", body, nonce, TEAM_JS if adjudicator else "")
