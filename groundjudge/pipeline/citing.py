"""Citations through the stages: markers read from the answer, each cited source checked alone, the verdict on them.

The answer's markers are read once (:func:`citing_of`) and stripped from the text the claims come from; the claims'
spans are put back into the original answer's offsets (:func:`attach_citations`). The NLI stage scores each cited
claim against the passages of each source it cites (:func:`score_cited`); in the cascade the local stage decides a
citation only when a cited source entails the claim (or the claim is locally CONTRADICTED), else the claim goes to
the judge (:func:`route_cited`), which is told which sources the claim cites. :func:`citation_fields` gives each
claim verdict its ``cited``, ``cited_supporting`` and ``citation``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from groundjudge.checker.evidence import EvidenceSelector, stopped_hints
from groundjudge.models import Claim, ClaimNLI, LocalThresholds, Passage, Quote
from groundjudge.pipeline.work import Work
from groundjudge.stages.citations import ClaimCites, Parsed, classify, parse_citations
from groundjudge.stages.route import Decision, decide_locally


def citing_of(w: Work, style: str) -> Parsed:
    """The answer (or claim) of ``w`` with its citation markers read and stripped; read once per answer."""
    if w.citing is None:
        s = w.sample
        text = s.answer if s.answer is not None else (s.claim or "")
        w.citing = parse_citations(text, len(s.contexts), s.context_ids, style)
    assert isinstance(w.citing, Parsed)
    return w.citing


def attach_citations(w: Work) -> None:
    """Each claim's citations, and its span in the original answer's offsets (the claims come from the stripped
    text); nothing changes for an answer without markers."""
    parsed = w.citing
    if not isinstance(parsed, Parsed) or not parsed.markers:
        w.cites = []
        return
    from groundjudge.stages.citations import claim_citations

    if w.sample.claim is not None:  # a claim row is one claim: it cites every marker it carries
        every = ClaimCites(
            sorted({d for m in parsed.markers for d in m.sources}),
            list(dict.fromkeys(u for m in parsed.markers for u in m.unknown)),
        )
        w.cites = [every for _ in w.claims]
        return
    w.cites = claim_citations(parsed, w.claims)
    w.claims = [
        c.model_copy(update={"span": parsed.span_in_original(c.span)}) if c.span is not None else c for c in w.claims
    ]


def score_cited(
    works: list[Work], selector: EvidenceSelector, head: Callable[[list[str], list[ClaimNLI], Work], None] | None
) -> None:
    """Each cited claim against the passages of each source it cites, alone (one result per cited source)."""
    items: list[tuple[Work, int, int]] = []
    inputs: list[tuple[list[str], list[Passage]]] = []
    for w in works:
        w.cited_nli = [{} for _ in w.claims]
        for i, (claim, cites) in enumerate(zip(w.claims, w.cites, strict=False)):
            for doc in cites.sources:
                passages = [p for p in w.passages if p.doc == doc]
                if passages:
                    items.append((w, i, doc))
                    inputs.append(([claim.text], passages))
    if not items:
        return
    results = selector.check(inputs)
    for (w, i, doc), res in zip(items, results, strict=True):
        if head is not None:
            head([w.claims[i].text], res, w)
        w.cited_nli[i][doc] = res[0]


def route_cited(w: Work, *, mode: str, thresholds: LocalThresholds) -> None:
    """Which cited sources entail each claim locally. In the cascade the local stage decides a cited claim only
    when a cited source entails it (SUPPORTED: CITED_SUPPORTS) or when it is locally CONTRADICTED; a cited claim
    locally SUPPORTED by another source only, or locally UNSUPPORTED (where a small model errs most), goes to the
    judge, which is told which sources the claim cites."""
    w.cited_support = []
    for i, cites in enumerate(w.cites):
        found = w.cited_nli[i] if i < len(w.cited_nli) else {}
        supporting = {
            doc
            for doc, r in found.items()
            if decide_locally(r, thresholds.t_support, None, None, thresholds.line) == "SUPPORTED"
        }
        w.cited_support.append(supporting)
        d = w.decisions[i]
        if mode != "cascade" or d.route != "nli" or not cites.sources:  # only [9]: wrong whatever the judge says
            continue
        if d.label == "SUPPORTED" and not supporting:
            note = "no cited source entails the claim alone"
        elif d.label == "UNSUPPORTED":
            note = "a cited claim the local model does not find entailed: the judge checks its citation"
        else:
            continue
        w.decisions[i] = Decision("", "judge", True, list(d.flags), note)


def citation_fields(w: Work, i: int, label: str, quotes: list[Quote]) -> dict[str, Any]:
    """A claim verdict's citation fields: none for an answer without markers."""
    if not w.cites:
        return {}
    cites = w.cites[i] if i < len(w.cites) else ClaimCites()
    supported = label == "SUPPORTED"
    supporting = set(w.cited_support[i]) if i < len(w.cited_support) else set()
    supporting |= {q.doc for q in quotes if q.verified and q.doc is not None}
    good = sorted(supporting & set(cites.sources)) if supported else []
    citation = classify(cites, supported, set(good), judged=label != "ERROR")
    return {
        "cited": [d + 1 for d in cites.sources],
        "cited_unknown": list(cites.unknown) or None,
        "cited_supporting": None if citation == "UNCHECKED" else [d + 1 for d in good],  # unknown: not judged
        "citation": citation,
    }


def cited_map(w: Work, claims: list[Claim]) -> dict[str, list[int]]:
    """The contexts (0-based) each of ``claims`` cites, by claim id, for the judge."""
    by_id = {c.id: i for i, c in enumerate(w.claims)}
    out: dict[str, list[int]] = {}
    for c in claims:
        i = by_id.get(c.id)
        if i is not None and i < len(w.cites) and w.cites[i].sources:
            out[c.id] = list(w.cites[i].sources)
    return out


def cited_hints(w: Work, asked: Collection[str]) -> list[Passage]:
    """The best passage of each cited source, so the judge is shown the sources a claim cites; for the claims of
    ``asked`` (ids: those the judge is asked about) whose scoring against a cited source stopped early, also that
    source's best BM25 passage left unscored (:func:`~groundjudge.checker.evidence.stopped_hints`, as for a claim's
    own evidence)."""
    hints = [r.entailment_passage for found in w.cited_nli for r in found.values() if r.entailment_passage is not None]
    by_doc: dict[int, list[tuple[str, ClaimNLI]]] = {}
    for claim, found in zip(w.claims, w.cited_nli, strict=False):  # no marker in the answer: no cited_nli
        if claim.id in asked:
            for doc, r in found.items():
                by_doc.setdefault(doc, []).append((claim.text, r))
    for doc, found_in_doc in by_doc.items():
        hints += stopped_hints(found_in_doc, [p for p in w.passages if p.doc == doc])
    return hints
