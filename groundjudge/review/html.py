"""Self-contained HTML pages (no network): the review queue, and the comparison of two runs.

The review page is a place to work: answers riskiest first (:func:`risk_key`), claims highlighted in place,
evidence on click, and for each claim a reviewer's decision (accept, or SUPPORTED / CONTRADICTED / UNSUPPORTED
with a note) made with the mouse or the keyboard, kept in the browser's localStorage under the run's identity
(:func:`run_identity`) and exported as JSONL (``groundjudge metrics --reviews``, ``groundjudge calibrate --reviews``).

Each card holds the answer's sources in full (long ones collapsed, searchable), every verified quote and NLI
passage marked in place and linked from its claim's row; the header says what the queue holds, why, and what is
decided, with the run's summary folded away.

The reports travel inside the page as JSON (escaped so that no text can end the script element: see
:func:`embed_json`); a small script (:mod:`groundjudge.review.page_assets`) builds the page with DOM calls
(``textContent``, never ``innerHTML`` on data); the sources arrive as static HTML cut at the marks' offsets and
escaped piece by piece (:mod:`groundjudge.review.page_sources`), so nothing in an answer or a source can inject
markup. Plots are inline SVG from :mod:`groundjudge.review.plots`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from groundjudge.errors import ArgumentError
from groundjudge.io.made_with import SHOWN, cut_text
from groundjudge.io.reports import finite_report
from groundjudge.models import AnswerReport
from groundjudge.review.metrics import Review, join_reviews, unsupported_rate
from groundjudge.review.page_assets import REVIEW_CSS, REVIEW_JS
from groundjudge.review.page_sources import claim_links, source_blocks
from groundjudge.review.page_sources import html_text as _text
from groundjudge.review.plots import histogram_svg
from groundjudge.review.summary import corrected_rows, summarize, summary_rows

# Inside <script> the HTML parser ends the element at "</script" and enters a double-escaped state at
# "<!--<script", whatever the JSON says; so the data carries no "<", ">" or "&" at all (JSON escapes instead),
# and is ASCII (lone surrogates and line separators as \u escapes), so no text can end or bend the element.
_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def embed_json(data: Any) -> str:
    """``data`` as JSON safe to put between ``<script type="application/json">`` tags (strict: no NaN)."""
    return json.dumps(data, ensure_ascii=True, allow_nan=False).translate(_JSON_ESCAPES)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def risk_counts(r: AnswerReport) -> dict[str, int]:
    """What makes an answer worth a look: contradicted claims, unverified quotes, unchecked and conflicting claims,
    claims whose NLI check failed."""
    return {
        "contradicted": sum(c.label == "CONTRADICTED" for c in r.claims),
        "unverified_quote": sum("unverified_quote" in c.flags for c in r.claims),
        "contradiction_unchecked": sum(not c.contradiction_checked for c in r.claims),
        "conflict": sum("conflict" in c.flags for c in r.claims),
        "error_claims": sum(c.label == "ERROR" for c in r.claims),
        "nli_failed": sum(c.nli is not None and c.nli.error is not None for c in r.claims),
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


# what makes text read otherwise than the checker read it: direction overrides, embeddings and isolates (a claim can
# show as its opposite), and characters that do not show (zero-width, word joiners, BOM, tag characters)
_HIDDEN = re.compile("[\u202a-\u202e\u2066-\u2069\u200b\u2060-\u2064\ufeff\U000e0000-\U000e007f]")


def hidden_characters(texts: Iterable[str]) -> list[str]:
    """The direction and invisible characters in ``texts`` (``U+202E``...), each once, in order of appearance."""
    return list(dict.fromkeys(f"U+{ord(ch):04X}" for text in texts for ch in _HIDDEN.findall(text)))


def risk_reasons(r: AnswerReport) -> list[str]:
    """Why an answer is where it is in the queue, in words (shown on its card)."""
    n = risk_counts(r)
    out: list[str] = []
    hidden = hidden_characters([r.answer or "", r.question or "", *r.contexts, *(c.claim.text for c in r.claims)])
    if hidden:
        out.append(f"hidden characters ({' '.join(hidden[:5])}): the text does not read as the checker read it")
    if r.verdict in ("ERROR", "FAIL"):
        out.append(r.verdict)
    if r.judges_disagree:
        out.append("judges disagree")
    words = {  # one, many
        "contradicted": ("contradicted", "contradicted"),
        "error_claims": ("claim error", "claim errors"),
        "nli_failed": ("NLI check failed", "NLI checks failed"),
        "unverified_quote": ("unverified quote", "unverified quotes"),
        "contradiction_unchecked": ("contradiction not checked", "contradictions not checked"),
        "conflict": ("conflict", "conflicts"),
        "wrong_citation": ("wrong citation", "wrong citations"),
    }
    out.extend(f"{n[k]} {one if n[k] == 1 else many}" for k, (one, many) in words.items() if n[k])
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
    (:attr:`~groundjudge.models.ClaimVerdict.nli_disagrees`), the locally decided claim nearest a local threshold
    (:func:`threshold_margin`), and its rarest claim label (``label_share``: each label's share of the run's claims)."""
    thresholds = local_thresholds(r.versions)
    margins = [(m, c) for c in r.claims if (m := threshold_margin(c, thresholds)) is not None]
    near = min(margins, key=lambda mc: mc[0], default=None)
    rare = min(r.claims, key=lambda c: label_share.get(c.label, 0.0), default=None)
    return {
        "disagree": sum(c.nli_disagrees for c in r.claims),
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
    "<kbd>j</kbd>/<kbd>k</kbd> or arrows: next / previous claim · <kbd>u</kbd> next undecided · <kbd>1</kbd> SUPPORTED"
    " · <kbd>2</kbd> CONTRADICTED · <kbd>3</kbd> UNSUPPORTED · <kbd>a</kbd> accept groundjudge's verdict ·"
    " <kbd>n</kbd> note (<kbd>Esc</kbd> to leave it) · <kbd>/</kbd> search the answer's sources"
)

_LEGEND = (
    "<div id='legend'><strong>Claims:</strong>"
    "<span class='swatch SUPPORTED'>SUPPORTED</span><span class='swatch CONTRADICTED'>CONTRADICTED</span>"
    "<span class='swatch UNSUPPORTED'>UNSUPPORTED</span><span class='swatch ERROR'>ERROR (not judged)</span>"
    "<span class='swatch you'>decided by you</span><span class='swatch over'>you overrode groundjudge</span>"
    "<strong>Sources:</strong><mark class='hl quote'>judge's quote</mark>"
    "<mark class='hl entail'>NLI support passage</mark><mark class='hl contra'>NLI contradiction passage</mark></div>"
)

_ORDER_WORDS = {
    "risk": "riskiest first (ERROR and FAIL, a contradicted claim, wrong citations, the lowest combined score, "
    "unverified quotes, claims not checked for contradiction)",
    "informative": "most informative first (NLI / judge disagreements, claims decided near a local threshold, "
    "rare labels)",
}


def queue_header(every: Sequence[AnswerReport], chosen: Sequence[AnswerReport], only_flagged: bool, order: str) -> str:
    """The header's lines for a reviewer: what is in the queue, why, in what order (HTML)."""
    n_claims = sum(len(r.claims) for r in chosen)
    which = (
        "only the flagged answers (not a clean PASS, or a claim with a flag: <code>--only-flagged</code>)"
        if only_flagged
        else "every answer of the file"
    )
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(Counter(r.verdict for r in chosen).items())) or "none"
    return (
        f"<p id='queue'><b>{len(chosen)} of {len(every)} answers</b> in this queue, {n_claims} claim"
        f"{'s' * (n_claims != 1)} to decide: {which}, {_text(_ORDER_WORDS[order])}. Verdicts: {_text(verdicts)}.</p>"
    )


def _versions(reports: Sequence[AnswerReport]) -> list[tuple[str, str]]:
    seen: dict[str, set[str]] = {}
    for r in reports:
        for k, v in r.versions.items():
            seen.setdefault(k, set()).add(v)
    return [(f"version: {k}", " | ".join(sorted(v))) for k, v in sorted(seen.items())]


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
    queue_reasons: Sequence[Sequence[str]] | None = None,
    bar_extra: str = "",
    script_before: str = "",
    queue_said: str = "",
) -> str:
    """The review page for ``reports`` as one HTML string: a queue, riskiest first (``order`` "risk":
    :func:`risk_key`) or most informative first ("informative": :func:`informative_key`). The header gives the
    summary with its intervals and how many decisions the corrected unsupported rate still needs; ``reviews`` (a
    previous export of decisions) count as labels there, and the header says how much they moved it.

    The review service (``groundjudge review serve``) hands ``reports`` already in queue order with
    ``queue_reasons`` (why each is there), and its own markup: ``bar_extra`` (HTML for the queue bar) and
    ``script_before`` (HTML before the page's script: the service's settings and the script that keeps decisions
    in its database instead of this browser); ``queue_said``, HTML that says what the queue is in place of the
    header's line on it (the service's page holds a window of the reviewer's queue)."""
    if order not in ORDERS:
        raise ArgumentError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    every = [finite_report(r) for r in reports]
    chosen = every if queue_reasons is not None else [r for r in every if r.flagged or not only_flagged]
    summary = summarize(chosen)  # in file order: "the first failed rows" are the file's
    if queue_reasons is not None:  # a queue built elsewhere, in its order
        reasons = [list(why) for why in queue_reasons]
    elif order == "risk":
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
        "links": [claim_links(r) for r in chosen],  # what each claim's row links to in its sources
    }
    blob = embed_json(payload)
    decided = decision_rows(every, reviews)
    head = summary_rows(summary) + decided + _versions(chosen)
    rows = "".join(f"<div><span>{_text(name)}:</span> {_text(value)}</div>" for name, value in head)
    needs = [f"Decisions still needed for a corrected unsupported rate: {decided[0][1]}."] + [
        f"{name}: {value}." for name, value in decided[1:]
    ]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{_text(title)}</title><style>{REVIEW_CSS}</style></head><body>"
        f"<header><h1>{_text(title)}</h1>{queue_said or queue_header(every, chosen, only_flagged, order)}"
        f"<p><span id='queue-decided'></span> {' '.join(_text(n) for n in needs)}</p>{_LEGEND}"
        "<details id='run'><summary>Run summary: scores with their intervals, costs, versions</summary>"
        f"<div id='headgrid'><div id='summary'>{rows}</div><div id='distribution'>{score_histogram(chosen)}</div>"
        "</div></details></header>"
        "<div id='bar'><div id='queuebar'><span id='progress'></span><progress id='progress-bar'></progress>"
        "<span id='progress-answers'></span>"
        "<label title='after a decision, go to the next undecided claim'><input id='autoadvance' type='checkbox'"
        " checked> auto-advance</label><label>reviewer <input id='reviewer' type='text' size='12' "
        "autocomplete='off'></label><button id='export' type='button'>Export decisions (JSONL)</button>"
        f"<span id='export-holds'></span><span id='export-as'></span><span id='storage'></span>{bar_extra}</div>"
        "<div id='name-ask' class='hidden' role='alert'>Type your name in the reviewer box, then export: each line "
        "carries it, so that several reviewers' files put together keep their decisions apart (lines without a "
        "name are read as one reviewer's, the latest decision counting, which hides a disagreement). "
        "<button id='name-anon' type='button'>Export without a name</button></div>"
        "<div id='done' class='hidden' role='status'><span id='done-text'></span> "
        "<button id='done-export' type='button'>Export decisions (JSONL)</button></div>"
        f"<div id='row2'><div id='filters'></div><div id='help'>{_HELP}</div></div></div><main><div id='answers'></div>"
        "<aside id='detail'><p>Click a highlighted claim to see its verdict and evidence.</p></aside></main>"
        f"<script type='application/json' id='gj-data'>{blob}</script>"
        f"<div id='gj-sources' hidden>{source_blocks(chosen)}</div>{script_before}<script>{REVIEW_JS}</script>"
        "</body></html>"
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
    from groundjudge.review.compare import LOWER_IS_BETTER, changed_claims, lost_text, verdict_table
    from groundjudge.review.plots import Interval, interval_svg

    na, nb = (_text(n) for n in names)
    warning = _settings_differ(result.get("settings_differ") or {})
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

        def _pm(ci: list[float | None] | None) -> str:  # the 95% interval of a difference ("" without one)
            return "" if not ci or None in ci else f" <small>95% CI [{_f(ci[0], '+.3f')}, {_f(ci[1], '+.3f')}]</small>"

        metrics += (
            f"<section id='corrected'><h2>Unsupported rate, raw and corrected for the checker's error ({paired})"
            f"</h2><table>{cells}</table><p id='corrected-diff'>B - A: raw {_f(corrected['raw_diff'], '+.3f')}"
            f"{_pm(corrected.get('raw_diff_ci'))}, corrected {_f(corrected['diff'], '+.3f')}"
            f"{_pm(corrected.get('diff_ci'))}</p></section>"
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
    lost = result.get("b_lost") or {}
    lost_said = "".join(
        f" {lost[key]} {what} (the paired tests do not show them: counted against B)."
        for key, what in lost_text().items()
        if lost.get(key)
    )
    flips = (
        f"<section id='flips'><h2>Verdict flips (rows: A, columns: B)</h2><table id='flip-table'><tr><th>A \\ B</th>"
        f"{head}</tr>{body_rows}</table><p>PASS lost {mc['pass_lost']}, gained {mc['pass_gained']} "
        f"(exact McNemar p={_f(mc['p_value'], '.4f')}). "
        f"{'B is significantly worse than A.' if result['b_significantly_worse'] else 'B is not significantly worse than A.'}"
        f"{_text(lost_said)}</p></section>"
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
    return _static_page(title, subtitle, warning + metrics + flips + errors + changed)


def _settings_differ(said: dict[str, dict[str, str]]) -> str:
    """The compare page's warning when A and B were scored with other settings (``compare_runs``'
    ``settings_differ``), naming at most :data:`~groundjudge.io.made_with.SHOWN` of them, each value cut to 300
    characters (report files are anyone's); "" when alike."""
    if not said:
        return ""

    def cut(value: str) -> str:
        return _text(cut_text(value))

    rows = "".join(
        f"<tr><td>{cut(key)}</td><td>{cut(v['a'])}</td><td>{cut(v['b'])}</td></tr>"
        for key, v in list(said.items())[:SHOWN]
    )
    more = f"<p>and {len(said) - SHOWN} more settings.</p>" if len(said) > SHOWN else ""
    return (
        "<section id='settings-differ'><h2 class='worse'>A and B were scored with other settings</h2><p>The "
        "differences below mix the answers' change with the scoring's. Score both with one command (the same --llm, "
        "--nli-model, --preset, --config and groundjudge) to compare the answers alone.</p><table><tr><th>setting"
        f"</th><th>A</th><th>B</th></tr>{rows}</table>{more}</section>"
    )


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
