"""Two runs of the same samples (prompt v1 vs v2): paired differences, bootstrap CIs, tests, verdict flips.

Each metric also gives each run's mean with its bootstrap interval over answers, the minimum difference the
comparison could detect (80% power, two-sided at ``alpha``, from the paired differences' spread) and, when the
difference is not significant, how many paired answers would detect the observed one
(:mod:`groundjudge.review.stats`). With labels, :func:`corrected_rates` gives both runs' unsupported rate raw and
corrected for the checker's error, and the difference with its interval.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from groundjudge.errors import ArgumentError
from groundjudge.io.made_with import settings_differ
from groundjudge.models import AnswerReport, ClaimVerdict
from groundjudge.review.metrics import (
    Review,
    corrected_as_json,
    failed_whole,
    gold_items,
    join_reviews,
    label_level,
    unsupported_rate,
)
from groundjudge.stats import (
    answers_needed,
    bootstrap_mean,
    corrected_difference,
    minimum_detectable_difference,
    permutation_p,
)
from groundjudge.tally import failed_row, vouches

# The per-answer quantities compared (README "Quantities"); report files written before ``contradicted_share`` was
# named so carry it as ``hallucination_ratio`` and read as it; ``not_supported_share`` comes from the claim counts.
METRICS = (
    "combined",
    "claims",
    "nli",
    "qa",
    "contradicted_share",
    "not_supported_share",
    "coverage",
    "citation_precision",
    "citation_recall",
)
# For these a rise is bad.
LOWER_IS_BETTER = {"contradicted_share", "not_supported_share"}
# What B lost that the paired tests cannot see (:func:`lost_answers`), each counted against B by the gate.
LOST = ("missing", "failed", "unvouched", "unchecked")


def bootstrap_ci(diffs: Sequence[float], n: int = 5000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of paired differences (:func:`groundjudge.stats.bootstrap_mean`: the
    answers resampled, ``n`` times)."""
    interval = bootstrap_mean(diffs, resamples=n, seed=seed, level=level)
    if interval.lo is None or interval.hi is None:
        raise ArgumentError("bootstrap_ci needs at least one difference")
    return interval.lo, interval.hi


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar test on discordant pairs (b one way, c the other)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def _finite(value: float | None) -> bool:
    """A score that can be compared: not missing, NaN or infinite (such a pair is left out of that metric)."""
    return value is not None and math.isfinite(value)


@dataclass(frozen=True)
class GateRows:
    """How both gates (``compare --fail-if-worse`` and the pytest baseline gate) draw the rows of run B against run
    A, each id by its last report (:func:`gate_rows`)."""

    paired: list[tuple[AnswerReport, AnswerReport]]
    """(A, B) of each id both have where neither failed: the paired tests' rows (each metric's pairs with a number
    on both sides, the verdicts McNemar counts)."""
    missing: list[str]
    """Ids of A that B lacks: never evaluated (a stop), counted against B."""
    failed: list[AnswerReport]
    """B's failed rows (:func:`groundjudge.tally.failed_row`), whatever A was: no failure passes a gate."""
    alone: list[AnswerReport]
    """B's rows that did not fail and that A cannot vouch for (:func:`groundjudge.tally.vouches`): a new id, A's row
    ERROR, NO_CLAIMS, failed or with no score, or B's own NO_CLAIMS. Each meets its gate's bar alone: in ``compare``
    the verdict FAIL counts against B (``unvouched``), as does B's NO_CLAIMS where A judged the answer
    (``unchecked``: B checks nothing A checked); ``assert_grounded``'s bar in the baseline gate."""


def gate_rows(a: Sequence[AnswerReport], b: Sequence[AnswerReport]) -> GateRows:
    """The one rule of which rows a gate compares and how (:class:`GateRows`), in B's order: ``compare_runs`` (and
    so ``compare``'s gate) and the pytest baseline gate (``assert_file_grounded``) both draw their rows here. A row
    with errors never vouches: not in A (its score is at its worst value: paired, it would let B look better), not
    in B (it fails the gate)."""
    last_a = {r.id: r for r in a}
    last_b = {r.id: r for r in b}
    paired: list[tuple[AnswerReport, AnswerReport]] = []
    failed: list[AnswerReport] = []
    alone: list[AnswerReport] = []
    for i, y in last_b.items():
        x = last_a.get(i)
        if failed_row(y):
            failed.append(y)
            continue
        if x is not None and not failed_row(x):
            paired.append((x, y))
        if x is None or not (vouches(x) and vouches(y)):
            alone.append(y)
    return GateRows(paired, [i for i in last_a if i not in last_b], failed, alone)


def compare_runs(
    a: Sequence[AnswerReport], b: Sequence[AnswerReport], alpha: float = 0.05, top: int = 10
) -> dict[str, Any]:
    """Paired comparison of run B against run A over the ids both have (the paired tests over the answers neither
    run failed; the rows drawn by :func:`gate_rows`, as the pytest baseline gate draws them). ``settings_differ``:
    where the two runs'
    reports were made with other settings (:func:`groundjudge.io.made_with.settings_differ`: another judge, NLI
    model, preset, thresholds or groundjudge's prompts), whose differences then mix the answers' change with the
    scoring's; ``compare`` warns and its gate refuses such runs, as does the pytest baseline gate."""
    pairs = _pairs(a, b)
    rows = gate_rows(a, b)
    out: dict[str, Any] = {"n_a": len(a), "n_b": len(b), "paired": len(pairs), "alpha": alpha, "metrics": {}}
    out["settings_differ"] = settings_differ(a, b)
    for metric in METRICS:
        vals = [
            (getattr(x.scores, metric), getattr(y.scores, metric))
            for x, y in rows.paired
            if _finite(getattr(x.scores, metric)) and _finite(getattr(y.scores, metric))
        ]
        if not vals:
            continue
        diffs = [y - x for x, y in vals]
        mean_diff = sum(diffs) / len(diffs)
        lo, hi = bootstrap_ci(diffs) if len(diffs) > 1 else (mean_diff, mean_diff)
        p = permutation_p(diffs)
        worse = (mean_diff > 0) if metric in LOWER_IS_BETTER else (mean_diff < 0)
        significant = p < alpha and not (lo <= 0 <= hi)
        out["metrics"][metric] = {
            "n": len(vals),
            "mean_a": sum(x for x, _ in vals) / len(vals),
            "mean_a_ci": bootstrap_mean([x for x, _ in vals]).ci,
            "mean_b": sum(y for _, y in vals) / len(vals),
            "mean_b_ci": bootstrap_mean([y for _, y in vals]).ci,
            "diff": mean_diff,
            "ci95": [lo, hi],
            "p_value": p,
            "significant": significant,
            "b_worse": worse and significant,
            # the smallest mean difference these pairs detect 80% of the time; and, for a difference they did not
            # find significant, how many paired answers would (None: no spread or no difference to detect)
            "min_detectable_diff": minimum_detectable_difference(diffs, alpha=alpha),
            "answers_needed": None if significant else answers_needed(diffs, alpha=alpha),
        }
    flips = Counter(f"{x.verdict}->{y.verdict}" for x, y in pairs if x.verdict != y.verdict)
    lost = sum(1 for x, y in rows.paired if x.verdict == "PASS" and y.verdict != "PASS")
    gained = sum(1 for x, y in rows.paired if x.verdict != "PASS" and y.verdict == "PASS")
    out["verdict_flips"] = dict(flips)
    out["error_types"] = error_type_changes(pairs)
    out["mcnemar"] = {"pass_lost": lost, "pass_gained": gained, "p_value": mcnemar_p(lost, gained)}

    def changed(x: AnswerReport, y: AnswerReport) -> tuple[float, dict[str, int]]:
        xc, yc = x.scores.combined, y.scores.combined
        delta = (yc if yc is not None and math.isfinite(yc) else 0.0) - (
            xc if xc is not None and math.isfinite(xc) else 0.0
        )
        return delta, claim_changes(x, y)

    moved = sorted(((x, y, *changed(x, y)) for x, y in pairs), key=lambda m: (-abs(m[2]), -sum(m[3].values())))
    out["most_changed"] = [
        {"id": y.id, "verdict": f"{x.verdict}->{y.verdict}", "combined_diff": delta, **claims}
        for x, y, delta, claims in moved[:top]
        if delta != 0.0 or any(claims.values())
    ]
    gated = ("combined", *sorted(LOWER_IS_BETTER))
    out["b_significantly_worse"] = bool(
        any(out["metrics"].get(m, {}).get("b_worse") for m in gated)
        or (out["mcnemar"]["p_value"] < alpha and lost > gained)
    )
    out["b_lost"] = lost_answers(a, b, top, rows)
    out["b_worse"] = out["b_significantly_worse"] or any(out["b_lost"][k] for k in LOST)
    return out


def lost_answers(
    a: Sequence[AnswerReport], b: Sequence[AnswerReport], top: int = 10, rows: GateRows | None = None
) -> dict[str, Any]:
    """What the paired tests cannot see, drawn by :func:`gate_rows` (``rows``, else drawn here): answers of A that B
    lacks (``missing``: never evaluated, a run stopped by the budget or a cache-only miss); answers that failed in B
    (``failed``, by the run summary's one rule, :func:`groundjudge.tally.failed_row`: ERROR, a stage named in
    ``errors``, a score that is no number), whatever A was: no failure passes a gate; and answers B judges FAIL that
    A does not vouch for (``unvouched``: a new id, or A was ERROR, NO_CLAIMS or failed there, so no pair and no PASS
    lost shows them; a baseline that failed throughout vouched for any B); and answers A judged (it vouches) that B
    checks no claim of (``unchecked``: NO_CLAIMS, no combined score to pair: an extraction that stopped finding the
    claims of the answers A found wrong would hide them). The paired tests leave them out, so a run that failed on
    the answers it would have scored worst could look no worse; the gate (``compare --fail-if-worse``: ``b_worse``)
    counts any of them against B. Counts and the first ``top`` ids."""
    rows = rows if rows is not None else gate_rows(a, b)
    failed = [y.id for y in rows.failed]
    unvouched = [y.id for y in rows.alone if y.verdict == "FAIL"]
    judged_in_a = {i for i, x in {x.id: x for x in a}.items() if vouches(x)}  # each id by its last report
    unchecked = [y.id for y in rows.alone if y.verdict != "FAIL" and y.id in judged_in_a]
    return {
        "missing": len(rows.missing),
        "missing_ids": rows.missing[:top],
        "failed": len(failed),
        "failed_ids": failed[:top],
        "unvouched": len(unvouched),
        "unvouched_ids": unvouched[:top],
        "unchecked": len(unchecked),
        "unchecked_ids": unchecked[:top],
    }


def lost_text(b_name: str = "B") -> dict[str, str]:
    """What each count of :func:`lost_answers` is, in words (the command's lines, the compare page)."""
    return {
        "missing": f"answers of A that {b_name} lacks",
        "failed": "answers failed in B",
        "unvouched": "answers FAIL in B that A does not vouch for",
        "unchecked": "answers A judged that B checks no claim of (NO_CLAIMS)",
    }


VERDICTS = ("PASS", "WARN", "FAIL", "NO_CLAIMS", "ERROR")


def error_type_changes(pairs: Sequence[tuple[AnswerReport, AnswerReport]]) -> dict[str, dict[str, int]]:
    """Claims of each kind of error in A and in B over the paired answers, and the change (B - A): which kinds rose
    or fell; kinds found in neither run are left out."""
    a = Counter(c.error_type for x, _ in pairs for c in x.claims if c.error_type is not None)
    b = Counter(c.error_type for _, y in pairs for c in y.claims if c.error_type is not None)
    return {k: {"a": a[k], "b": b[k], "diff": b[k] - a[k]} for k in sorted(set(a) | set(b))}


def _pairs(a: Sequence[AnswerReport], b: Sequence[AnswerReport]) -> list[tuple[AnswerReport, AnswerReport]]:
    """(A, B) reports of each id both runs have, in B's order; an id a run repeats (a killed --retry-errors run
    leaves the old and the new line) counts once, its last report."""
    last_a = {r.id: r for r in a}
    last_b = {r.id: r for r in b}
    return [(last_a[i], r) for i, r in last_b.items() if i in last_a]


def verdict_table(a: Sequence[AnswerReport], b: Sequence[AnswerReport]) -> dict[str, Any]:
    """Every paired answer's verdict in A (rows) against B (columns), including the unchanged diagonal."""
    pairs = _pairs(a, b)
    seen = {x.verdict for x, _ in pairs} | {y.verdict for _, y in pairs}
    labels = [v for v in VERDICTS if v in seen] + sorted(seen - set(VERDICTS))
    index = {v: i for i, v in enumerate(labels)}
    counts = [[0] * len(labels) for _ in labels]
    for x, y in pairs:
        counts[index[x.verdict]][index[y.verdict]] += 1
    return {"labels": labels, "counts": counts, "paired": len(pairs)}


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!?;: ")


def align_claims(x: AnswerReport, y: AnswerReport) -> list[tuple[ClaimVerdict | None, ClaimVerdict | None]]:
    """A's and B's claims side by side: the same text (case and spacing aside) first, the rest in answer order."""
    free_b = list(y.claims)
    rows: list[tuple[ClaimVerdict | None, ClaimVerdict | None]] = []
    left: list[ClaimVerdict] = []
    for c in x.claims:
        hit = next((d for d in free_b if _norm(d.claim.text) == _norm(c.claim.text)), None)
        if hit is None:
            left.append(c)
        else:
            free_b.remove(hit)
            rows.append((c, hit))
    for i in range(max(len(left), len(free_b))):
        rows.append((left[i] if i < len(left) else None, free_b[i] if i < len(free_b) else None))
    return rows


def claim_changes(x: AnswerReport, y: AnswerReport) -> dict[str, int]:
    """How one answer's claims moved from A to B, the claims paired by text (:func:`align_claims`):
    ``claim_label_changes``, claims of the same text in both whose label changed; ``claims_only_a`` and
    ``claims_only_b``, claims whose text only one run has (a reworded answer's claims are these, not label
    changes). A claim's id is no match: each run numbers its own claims."""
    relabelled = only_a = only_b = 0
    for c, d in align_claims(x, y):
        if c is not None and d is not None and _norm(c.claim.text) == _norm(d.claim.text):
            relabelled += c.label != d.label
        else:
            only_a += c is not None
            only_b += d is not None
    return {"claim_label_changes": relabelled, "claims_only_a": only_a, "claims_only_b": only_b}


def changed_claims(a: Sequence[AnswerReport], b: Sequence[AnswerReport], top: int = 20) -> list[dict[str, Any]]:
    """The paired answers whose verdict or claims changed, largest change of combined score first, each with its
    claims aligned (:func:`align_claims`) and every row marked ``changed`` when its text or label differs."""
    out: list[dict[str, Any]] = []
    for x, y in _pairs(a, b):
        rows = []
        for c, d in align_claims(x, y):
            same = c is not None and d is not None and _norm(c.claim.text) == _norm(d.claim.text)
            rows.append(
                {
                    "a": None if c is None else {"text": c.claim.text, "label": c.label, "route": c.route},
                    "b": None if d is None else {"text": d.claim.text, "label": d.label, "route": d.route},
                    "changed": not (same and c is not None and d is not None and c.label == d.label),
                }
            )
        if x.verdict == y.verdict and not any(r["changed"] for r in rows):
            continue
        xc = x.scores.combined if _finite(x.scores.combined) else None
        yc = y.scores.combined if _finite(y.scores.combined) else None
        diff = yc - xc if xc is not None and yc is not None else None
        out.append(
            {
                "id": y.id,
                "verdict_a": x.verdict,
                "verdict_b": y.verdict,
                "combined_a": xc,
                "combined_b": yc,
                "combined_diff": diff,
                "claims": rows,
            }
        )
    out.sort(key=lambda r: (-(abs(r["combined_diff"]) if r["combined_diff"] is not None else 1.0), r["id"]))
    return out[:top]


def corrected_rates(
    a: Sequence[AnswerReport],
    b: Sequence[AnswerReport],
    labels: dict[str, str] | None = None,
    reviews: Sequence[Review] = (),
) -> dict[str, Any] | None:
    """Both runs' unsupported rate, raw and corrected for the checker's error measured on labels
    (:func:`groundjudge.review.metrics.unsupported_rate`), over the answers both runs have; None without labels.

    Labels: the gold labels the rows carry, replaced by ``labels`` (answer id -> label, e.g. from
    :func:`groundjudge.review.metrics.read_labels`) where given, and reviewer decisions (``reviews``; a claim
    matches in a run when its answer id, claim id and text are the same there), which make the level "claim".
    ``paired`` is True when both runs' labels fall on the same answers: the two rates are then measured on the same
    answers with the same labels, and ``diff`` (B - A) compares like with like. ``diff_ci`` and ``raw_diff_ci``:
    95% intervals of the differences from one bootstrap over the answers both runs have, each answer drawn with
    both runs' claims and labels (:func:`groundjudge.review.stats.corrected_difference`), so that what the runs
    share cancels. With too few labels a run's ``value`` is None, its ``needs`` says how many more of each class it
    takes, and ``diff`` is None.
    """
    pairs = _pairs(a, b)
    runs = [[x for x, _ in pairs], [y for _, y in pairs]]
    if labels:
        runs = [[r.model_copy(update={"label": labels[r.id]}) if r.id in labels else r for r in run] for run in runs]
    matched = [join_reviews(run, reviews).matched if reviews else [] for run in runs]
    claim_gold = len(gold_items(runs[0], "claim"))
    level = "claim" if reviews else label_level(claim_gold, len(gold_items(runs[0], "answer")))
    labelled = [
        {x.cluster for x in gold_items(run, level)} | {m.report.id for m in found}
        for run, found in zip(runs, matched, strict=True)
    ]
    if not labelled[0] and not labelled[1]:
        return None
    measured = [unsupported_rate(run, level, found) for run, found in zip(runs, matched, strict=True)]
    rates = [corrected_as_json(m, level, failed_whole(run)) for m, run in zip(measured, runs, strict=True)]
    d = corrected_difference(*measured)
    return {
        "level": level,
        "paired": labelled[0] == labelled[1],
        "labelled_answers": [len(labelled[0]), len(labelled[1])],
        "a": rates[0],
        "b": rates[1],
        "raw_diff": d["raw"],
        "raw_diff_ci": d["raw_ci"],
        "diff": d["value"],
        "diff_ci": d["ci"],
    }
