"""Routing: whether the NLI stage decides a claim alone (and how) or escalates it to the judge.

Holds :func:`decide_locally` (the local verdict rule, also used by calibration), :class:`Decision` and
:func:`route_claim`. Knows nothing of the :class:`~groundjudge.pipeline.Evaluator`: the mode and the thresholds
in force are handed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from groundjudge.checker.signals import conflict_of
from groundjudge.models import EVEN_ODDS, Claim, ClaimNLI, Label, LocalThresholds, Route

HEAD_MARGIN = 0.5  # a verdict head's P(SUPPORTED) must be past this for a local verdict (see decide_locally)


def decide_locally(
    nli: ClaimNLI,
    t_support: float | None,
    t_contradict: float | None,
    t_unsupported: float | None = None,
    line: float | None = None,
) -> Label | None:
    """The verdict the NLI stage is confident enough to give alone, else None (escalate).

    SUPPORTED at a support score >= t_support (without a head, also not below the contradiction), CONTRADICTED at
    contradiction >= t_contradict, and, when t_unsupported is set, UNSUPPORTED at a support score <= t_unsupported.
    The support score is the verdict head's probability when a head is in force, else the best entailment. A
    threshold that is None is never reached.

    A head's probability must also be more likely than not the verdict's: SUPPORTED only above ``line`` (the
    thresholds' own, ``LocalThresholds.line``: for a cascade fitted on labelled claims, where the head says 0.5
    read at their mix; else ``HEAD_MARGIN``, 0.5), CONTRADICTED and UNSUPPORTED only below it, whatever the
    thresholds (so a head's cut-offs fitted before the margin rule, or given by hand, cannot call a claim the head
    thinks 0.5% likely SUPPORTED).
    """
    if not nli.passages_scored:
        return None
    s = nli.support
    headed = nli.supported is not None
    margin = HEAD_MARGIN if line is None else line
    # the raw rule also asks entailment >= contradiction; a head has read the contradiction already (and its
    # probability is on another scale)
    if t_support is not None and s >= t_support and (s > margin if headed else s >= nli.contradiction):
        return "SUPPORTED"
    if headed and s >= margin:
        return None  # the head says more likely supported than not: only the judge may say otherwise
    if t_contradict is not None and nli.contradiction >= t_contradict:
        return "CONTRADICTED"
    if t_unsupported is not None and s <= t_unsupported:
        return "UNSUPPORTED"
    return None


@dataclass
class Decision:
    """How the NLI stage routes one claim: decided locally (``label``) or escalated (route "judge")."""

    label: Label | Literal[""]
    route: Route
    contradiction_checked: bool
    flags: list[str] = field(default_factory=list)
    note: str = ""
    error_type: str | None = None  # a local CONTRADICTED or UNSUPPORTED: what kind of error (see local_error_type)


def local_error_type(label: str, conflict: str | None) -> str | None:
    """The kind of error of a claim decided locally: the conflict signal's (``number``, ``date``) where it explains
    the call; else ``unsupported_detail`` for UNSUPPORTED (the sources do not state it) and ``other`` for
    CONTRADICTED; None for SUPPORTED (and ERROR: no finding about the answer)."""
    if label not in ("CONTRADICTED", "UNSUPPORTED"):
        return None
    if conflict is not None:
        return conflict
    return "unsupported_detail" if label == "UNSUPPORTED" else "other"


def reads_conflict(mode: str, thresholds: LocalThresholds) -> Callable[[float], bool]:
    """Whether :func:`route_claim`'s conflict check reads a claim scored by the raw model (no verdict head, no local
    contradiction call: where the fewer-pairs rule is in force), by its best entailment: a claim the NLI stage
    decides alone (nli mode decides every claim; the cascade one at or below ``t_unsupported``, or at ``t_support``
    and above). An escalated claim carries no conflict. For ``checker.evidence.EvidenceSelector``'s ``conflicts``."""
    t = thresholds

    def reads(entailment: float) -> bool:
        probe = ClaimNLI(entailment=entailment, passages_scored=1)  # no contradiction: SUPPORTED wherever it can be
        return mode == "nli" or decide_locally(probe, t.t_support, None, t.t_unsupported, t.line) is not None

    return reads


def local_contradiction(thresholds: LocalThresholds, model: object) -> bool:
    """Whether the NLI stage can call CONTRADICTED at all with ``thresholds`` and ``model`` (a checker without a
    contradiction output never does)."""
    return thresholds.t_contradict is not None and bool(getattr(model, "has_contradiction", True))


class EvidenceRule(TypedDict):
    """``checker.evidence.EvidenceSelector``'s keywords that decide which pieces a claim is scored on."""

    early_exit: float | None
    lines: list[float] | None
    conflicts: bool | Callable[[float], bool]


def evidence_rule(
    mode: str, thresholds: LocalThresholds, *, reads_every_score: bool, conflict_check: bool, weak_floor: float
) -> EvidenceRule:
    """``checker.evidence.EvidenceSelector``'s early exit, decision lines and conflict rule for claims routed with
    ``thresholds``: the one setting-up the pipeline and the benchmarks' replays share.

    Stopping at the first piece that entails a claim is safe only when no later piece could make it CONTRADICTED,
    and a verdict head's ``t_support`` is on its own scale: with a local contradiction call or a head
    (``reads_every_score``), every piece is scored. Otherwise a claim stops once its best entailment settles all
    that reads it but the NLI part's value (:func:`settled_at`), and, after the sentence alone and the best passage,
    more evidence is scored only near an entailment line in force (``t_support``, ``t_unsupported``); with the
    conflict check on, so is a claim it reads (:func:`reads_conflict`) that one of its pieces disagrees with."""
    t = thresholds
    return EvidenceRule(
        early_exit=None if reads_every_score else settled_at(mode, t, weak_floor),
        lines=None if reads_every_score else [x for x in (t.t_support, t.t_unsupported) if x is not None],
        conflicts=reads_conflict(mode, t) if conflict_check else False,
    )


def settled_at(mode: str, thresholds: LocalThresholds, weak_floor: float) -> float | None:
    """The early exit of the raw model's claims: the best entailment at which a claim stops (None: none).

    With a ``t_support``, that line (nli mode's 0.55 for the shared model): SUPPORTED is settled there, and a
    claim's contradiction is read over the pieces scored up to it, as it always was. In a cascade without one (one
    that never says SUPPORTED alone, such as the shared model's, UNSUPPORTED at 0.21), the lowest level at which
    nothing that reads its support can change as more evidence raises it, but the NLI part's value: its route (above
    ``t_unsupported``: escalated whatever comes next, so the conflict check does not read it), its ``weak`` flag
    (``weak_floor``) and whether the model disagrees with the judge (:data:`~groundjudge.models.EVEN_ODDS`). There a
    claim the sentence alone lifts to 0.5 used to get its best passage as well (issue 32: a third of the cascade's
    pairs on long answers). nli mode without a ``t_support`` has none: every claim is decided there, and the
    conflict check reads it at any entailment."""
    t = thresholds
    if t.t_support is not None:
        return t.t_support
    if mode != "cascade":
        return None
    past_unsupported = math.nextafter(t.t_unsupported, math.inf) if t.t_unsupported is not None else 0.0
    return max(past_unsupported, weak_floor, EVEN_ODDS)


def route_claim(
    claim: Claim,
    nli: ClaimNLI,
    *,
    mode: str,
    thresholds: LocalThresholds,
    local_contradiction: bool,
    conflict_check: bool,
    escalate_conflicts: bool,
) -> Decision:
    """Decided locally, or escalated (route "judge"); says whether a contradiction could have been found.

    Args:
        claim: the claim.
        nli: what the NLI stage found for it.
        mode: ``nli``, ``cascade`` or ``llm``.
        thresholds: the local decision thresholds in force.
        local_contradiction: whether the NLI stage can call CONTRADICTED at all (thresholds and model).
        conflict_check: flag a locally decided claim whose passage shares its terms but not its numbers or months.
        escalate_conflicts: in the cascade, send such a claim to the judge instead.
    """
    if mode == "llm":
        return Decision("", "judge", True)
    if nli.error is not None:
        if mode == "nli":
            return Decision("ERROR", "nli", False)  # NLI could not score it and there is no judge
        return Decision("", "judge", True)
    t = thresholds
    local = decide_locally(nli, t.t_support, t.t_contradict, t.t_unsupported, t.line)
    if local is None and mode == "nli":
        local = "UNSUPPORTED"
    conflict = None
    passages = dict.fromkeys(p.text for p in (nli.entailment_passage, nli.contradiction_passage) if p)
    if local in ("SUPPORTED", "UNSUPPORTED") and conflict_check:
        conflict = next((x for p in passages if (x := conflict_of(claim.text, p))), None)
    if local is None or (conflict and mode == "cascade" and escalate_conflicts):
        return Decision("", "judge", True, ["conflict"] if conflict else [], conflict[1] if conflict else "")
    kind = conflict[0] if conflict else None
    if local == "CONTRADICTED":  # the signal only names the kind here: it raises no flag
        kind = next((x[0] for p in passages if (x := conflict_of(claim.text, p))), None)
    checked = local == "CONTRADICTED" or local_contradiction
    flags = ["conflict"] if conflict else []
    return Decision(local, "nli", checked, flags, conflict[1] if conflict else "", local_error_type(local, kind))
