"""Pydantic types that cross module boundaries, and a report's notebook table; imports nothing of groundjudge."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, computed_field, model_validator

Role = Literal["system", "user", "assistant"]

# Where the local model's support score says "more likely supported than not": a judged claim on the other side of
# the judge's verdict is one the model disagrees with (:attr:`ClaimVerdict.nli_disagrees`: the review queue and the
# second judge read it; ``stages.route.settled_at``, a cascade's early exit without a ``t_support``, is never below it).
EVEN_ODDS = 0.5


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str
    # The first ``cache_upto`` characters of ``content`` are the same across many calls (instructions, or sources
    # shared by several answers): a provider may cache them (Anthropic cache_control; OpenAI caches prefixes itself).
    cache_upto: int | None = Field(None, exclude_if=lambda v: v is None)


class Usage(BaseModel):
    """What calls cost: billed calls, tokens and USD, plus the calls answered from the cache.

    ``input_tokens`` is every input token billed, whatever its rate; ``cached_input_tokens`` of them were read
    from the provider's prompt cache (billed at the cached rate) and ``cache_write_tokens`` were written to it
    (Anthropic cache creation, billed at the cache-write rate).

    ``unpriced_calls`` of the billed calls went to a model with no known price: ``cost_usd`` holds nothing of
    theirs, so the cost is unknown, not what ``cost_usd`` says (:meth:`cost_text`). Left out of JSON when 0, so
    that a priced run's reports are what they were before the field existed.

    ``unsettled_calls`` of the calls were sent and got no reply (a timeout, a connection lost after sending): the
    provider may have billed them, and no usage says for how much, so each is counted at its worst case (its input
    bound and a ``max_tokens`` reply at the model's price), the amount in ``unsettled_cost_usd``, a part of
    ``cost_usd``: what the budget holds them at, an upper bound, never a billed figure; their tokens are not known and
    not counted. Left out of JSON when 0, as ``unpriced_calls``.
    """

    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    unpriced_calls: int = Field(
        0, exclude_if=lambda v: v == 0, description="billed calls to a model with no known price (not in cost_usd)"
    )
    unsettled_calls: int = Field(
        0,
        exclude_if=lambda v: v == 0,
        description="calls sent that got no reply (a timeout, a connection lost): counted in calls, at their worst "
        "case in cost_usd",
    )
    unsettled_cost_usd: float = Field(
        0.0,
        exclude_if=lambda v: v == 0,
        description="the part of cost_usd that is the worst case of the unsettled calls, not a billed amount",
    )

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f: getattr(self, f) + getattr(other, f) for f in Usage.model_fields})

    def __sub__(self, other: Usage) -> Usage:
        return Usage(**{f: getattr(self, f) - getattr(other, f) for f in Usage.model_fields})

    def known_cost(self) -> float | None:
        """``cost_usd`` when every billed call had a price, else None (unknown, never a known 0): for tables."""
        return None if self.unpriced_calls else self.cost_usd

    def cost_text(self) -> str:
        """The cost as said to a person: "$0.0123", or, when a billed call had no price, "unknown (3 calls to a
        model without a price)" or "$0.0123 + unknown for 3 calls"; never a bare dollar figure then. Calls sent
        with no reply say that the figure is at most and how much of it is their worst case, also where it holds
        only a share of one (an answer packed with others carries the call on the first answer's usage alone,
        :func:`~groundjudge.llm.packing.share_packed`: the others, or a sum without the first, have its cost and no
        call)."""
        n = self.unpriced_calls
        held = ""
        if self.unsettled_calls or self.unsettled_cost_usd:
            k = self.unsettled_calls
            calls_sent = f"{k} call{'s' * (k != 1)} sent with no reply" if k else "a packed call sent with no reply"
            share = "" if k else "a share of "
            held = f" (at most; ${self.unsettled_cost_usd:.4f} of it is {share}the worst case of {calls_sent})"
        if not n:
            return f"${self.cost_usd:.4f}{held}"
        calls = f"{n} call{'s' * (n != 1)}"
        if self.calls > n:  # some billed calls were priced: their part is known
            return f"${self.cost_usd:.4f}{held} + unknown for {calls}"
        return f"unknown ({calls} to a model without a price)"


class PromptRef(BaseModel):
    """Which prompt produced a request; part of every cache key."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str


class Prompt(BaseModel):
    """A versioned prompt loaded from prompts/*.md."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    description: str = ""
    variables: tuple[str, ...] = Field(default_factory=tuple)
    system: str
    user: str

    @property
    def ref(self) -> PromptRef:
        return PromptRef(name=self.name, version=self.version)


class Span(BaseModel):
    """A piece of text with its character offsets in the text it was cut from."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    text: str


class Passage(BaseModel):
    """A window of one source document, with its offsets there and its length in NLI-model tokens."""

    model_config = ConfigDict(frozen=True)

    doc: int
    start: int
    end: int
    text: str
    n_tokens: int = 0


class ClaimNLI(BaseModel):
    """What the NLI stage found for one claim: its best entailment and best contradiction, and where."""

    # finite: a NaN read from a hand-edited report passed every comparison and moved calibrate's cut-offs
    entailment: float = Field(0.0, allow_inf_nan=False)
    contradiction: float = Field(0.0, allow_inf_nan=False)
    neutral: float = Field(0.0, allow_inf_nan=False)  # of the best-entailment passage
    entailment_passage: Passage | None = None
    contradiction_passage: Passage | None = None
    passages_scored: int = 0
    passages_total: int = 0
    # stopped at the early exit (``stages.route.settled_at``) with pieces left unscored: in nli mode at t_support; in a
    # cascade without one, once only the value of its support could still rise (escalated, not weak, even odds)
    early_exit: bool = False
    error: str | None = None  # the claim could not be scored (too long for the model's window)
    # P(SUPPORTED) from the verdict head (groundjudge.checker.head) when one is in force; the SUPPORTED / UNSUPPORTED
    # thresholds then apply to it instead of the entailment
    supported: float | None = Field(None, allow_inf_nan=False)

    @property
    def support(self) -> float:
        """What the SUPPORTED / UNSUPPORTED thresholds apply to: the verdict head's probability, else the entailment."""
        return self.supported if self.supported is not None else self.entailment


# a level on a probability's scale: a threshold below 0 or above 1 (or NaN) would decide every claim or none whatever
# its scores (a model profile or verdict head edited by hand, or written by another tool), so it is refused
Level = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class LocalThresholds(BaseModel):
    """When the NLI stage decides a claim alone (see :func:`groundjudge.stages.route.decide_locally`). Each level
    is a probability, in [0, 1]."""

    model_config = ConfigDict(frozen=True)

    t_support: Level | None  # None: never SUPPORTED locally (no level is precise enough)
    t_contradict: Level | None  # None: never CONTRADICTED locally (the model's contradiction head is not trusted)
    t_unsupported: Level | None = None  # None: never UNSUPPORTED locally in the cascade
    # a verdict head's line: SUPPORTED only above it, CONTRADICTED / UNSUPPORTED only below it (None: the head's
    # own 0.5). The cascade's is where the head's probability, read at the labelled claims' mix, is 0.5
    # (learn.calibrate.MixCalibration); left out of JSON while None
    line: Level | None = Field(None, exclude_if=lambda v: v is None)


Label = Literal["SUPPORTED", "CONTRADICTED", "UNSUPPORTED", "ERROR"]
Route = Literal["nli", "judge"]
AnswerVerdict = Literal["PASS", "WARN", "FAIL", "NO_CLAIMS", "ERROR"]
# what a claim's citation markers are worth (groundjudge.stages.citations.classify)
CitationLabel = Literal["CITED_SUPPORTS", "OTHER_SUPPORTS", "NOT_SUPPORTED", "UNCITED", "UNCHECKED"]
# what kind of error a claim that is not SUPPORTED makes
ErrorType = Literal["number", "date", "entity", "relation", "negation", "unsupported_detail", "other"]
ERROR_TYPES: tuple[str, ...] = ("number", "date", "entity", "relation", "negation", "unsupported_detail", "other")


def _absent(value: Any) -> bool:
    return value is None


def _flag(default: bool | int, description: str) -> Any:
    """A count or flag of what went wrong or what was cited, left out of JSON while it is 0 / False, so that the
    reports of runs where it never happened are what they were before the field existed."""
    return Field(default, exclude_if=lambda v: not v, description=description)


class SourceInfo(BaseModel):
    """Where one context of a conversation row comes from (``groundjudge.io.conversations``).

    ``message`` is the index in the row's ``messages`` (None: a document given in the row's ``contexts``); ``role``
    is ``tool``, ``document`` (a retrieved document), ``user`` or ``system`` (only when an option makes them
    evidence); ``part`` is the content block or list item inside the message when it holds several sources. The
    context's text is exactly that source's text, so offsets in the context are offsets in the source.
    """

    model_config = ConfigDict(frozen=True)

    message: int | None = None
    role: Literal["tool", "document", "user", "system"]
    tool_call_id: str | None = Field(None, exclude_if=lambda v: v is None)
    tool_name: str | None = Field(None, exclude_if=lambda v: v is None)
    part: int | None = Field(None, exclude_if=lambda v: v is None)
    note: str | None = Field(None, exclude_if=lambda v: v is None)  # e.g. a tool_call_id that matches no call


class SourceRef(SourceInfo):
    """A piece of one source: context ``doc`` (its :class:`SourceInfo`) from character ``start`` to ``end``."""

    doc: int
    start: int | None = None
    end: int | None = None


class ConversationTurn(BaseModel):
    """One message of a conversation row as the report keeps it (for the review page): its role and text."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant", "tool"]
    text: str
    tool_call_id: str | None = Field(None, exclude_if=lambda v: v is None)
    tool_name: str | None = Field(None, exclude_if=lambda v: v is None)
    evidence: bool = False  # some context comes from this message
    answer: bool = False  # the assistant turn the report judges


class Sample(BaseModel):
    """One thing to evaluate: an answer (or a single claim) and the sources it should be grounded in."""

    model_config = ConfigDict(extra="ignore")

    id: str
    contexts: list[str]
    # the contexts' ids, when the row gave its contexts as objects {"id", "text"} (citation markers may name them)
    context_ids: list[str] | None = Field(None, exclude_if=_absent)
    answer: str | None = None
    claim: str | None = None
    question: str | None = None
    label: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # a conversation row: where each context comes from, and the messages (groundjudge.io.conversations)
    sources: list[SourceInfo] | None = None
    conversation: list[ConversationTurn] | None = None


class Claim(BaseModel):
    """An atomic claim; ``span`` is where it comes from in the answer, when that could be located."""

    id: str
    text: str
    span: Span | None = None
    origin: Literal["llm", "sentence", "input", "fallback"] = Field(
        "sentence",
        description="llm (the claims call), sentence (the answer's sentences: nli mode), input (a claim row), "
        "fallback (the answer's sentences because the claims call failed: the answer's verdict is ERROR)",
    )


class Quote(BaseModel):
    """An evidence quote from the judge, located in the sources (``verified``) or not."""

    text: str
    doc: int | None = None
    start: int | None = None
    end: int | None = None
    verified: bool = False
    match: Literal["exact", "normalized"] | None = None
    parts: list[tuple[int, int]] | None = None  # a quote joined by an ellipsis: where each piece stands in ``doc``
    problem: str | None = None  # why it does not count as evidence (not found, too short)
    # a conversation row: the message the quote is in (filled from AnswerReport.sources)
    source: SourceRef | None = Field(None, exclude_if=lambda v: v is None)


class SecondVerdict(BaseModel):
    """The second judge's verdict on a claim (README "Second judge"): shown beside the first, never scored."""

    label: Label
    reason: str = ""
    error_type: ErrorType | None = Field(None, exclude_if=_absent)
    flags: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    error: str | None = Field(None, exclude_if=_absent)


class SecondJudging(BaseModel):
    """What the second judge did for an answer: why it looked, how many claims it judged, how many verdicts differ
    from the report's, what it cost, and its error if it failed (the answer is scored all the same)."""

    model: str
    why: list[str] = Field(
        default_factory=list, description="FAIL, contradicted, nli_disagrees (flagged), sample (the sampled share)"
    )
    claims: int = 0
    disagree: int = 0
    usage: Usage = Field(default_factory=Usage)
    error: str | None = Field(None, exclude_if=_absent)


class ClaimVerdict(BaseModel):
    """The verdict on one claim and everything behind it."""

    claim: Claim
    label: Label
    route: Route
    nli: ClaimNLI | None = None
    reason: str = ""
    quotes: list[Quote] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    error: str | None = None
    contradiction_checked: bool = Field(
        False,
        description="whether a contradiction would have been found: judged claims, or a local model whose "
        "contradiction threshold is in force; False for claims decided by a model that cannot call CONTRADICTED",
    )
    source: SourceRef | None = Field(
        None,
        exclude_if=lambda v: v is None,
        description="a conversation row: the message the verdict rests on (its first verified quote, else the "
        "NLI passage) for a SUPPORTED or CONTRADICTED claim; filled from AnswerReport.sources",
    )
    cited: list[int] | None = Field(
        None, exclude_if=_absent, description="the sources (numbered from 1) the claim's sentence cites"
    )
    cited_unknown: list[str] | None = Field(
        None, exclude_if=_absent, description="citation markers of the claim that name no source ([9] of 3)"
    )
    cited_supporting: list[int] | None = Field(
        None, exclude_if=_absent, description="the cited sources (from 1) that support the claim alone"
    )
    citation: CitationLabel | None = Field(
        None,
        exclude_if=_absent,
        description="CITED_SUPPORTS, OTHER_SUPPORTS (only an uncited source supports it), NOT_SUPPORTED, UNCITED, "
        "UNCHECKED (the claim could not be judged: whether its citation is right is unknown); absent when the answer "
        "cites nothing",
    )
    error_type: ErrorType | None = Field(
        None, exclude_if=_absent, description="the kind of error of a CONTRADICTED or UNSUPPORTED claim"
    )
    second_judge: SecondVerdict | None = Field(
        None, exclude_if=_absent, description="the second judge's verdict (README 'Second judge'); never scored"
    )
    judges_disagree: bool | None = Field(
        None,
        exclude_if=_absent,
        description="the second judge gave another verdict than this one (None: no second verdict to compare)",
    )

    @property
    def nli_disagrees(self) -> bool:
        """The local model and the judge disagree on this judged claim: its NLI support (the entailment, or the
        verdict head's probability) is at least even odds and the judge did not find it SUPPORTED, or below even
        odds and the judge did. (The review queue's rule and the second judge's: one place.)"""
        if self.route != "judge" or self.nli is None or self.nli.error or self.label == "ERROR":
            return False
        return (self.nli.support >= EVEN_ODDS) != (self.label == "SUPPORTED")


class QAItem(BaseModel):
    question: str
    answer_from_answer: str
    context_answer: str | None = None
    consistent: bool | None = None


class QAResult(BaseModel):
    items: list[QAItem] = Field(default_factory=list)
    score: float | None = None
    error: str | None = None


class Scores(BaseModel):
    """Scores in [0, 1]; None where the part did not run or had nothing to score (README "Quantities").

    ``contradicted_share`` was called ``hallucination_ratio`` before: report files that carry the old key still
    read (it is accepted on input, never written).
    """

    claims: float | None = None
    nli: float | None = None
    qa: float | None = None
    combined: float | None = None
    contradicted_share: float | None = Field(
        None,
        validation_alias=AliasChoices("contradicted_share", "hallucination_ratio"),
        description="CONTRADICTED claims over all claims; None when no claim could be judged",
    )
    coverage: float | None = None
    n_claims: int = Field(0, description="claims extracted from the answer")
    n_judged: int = Field(
        0,
        description="claims given a verdict, by the local checker or the LLM judge (n_claims less n_errors); "
        "n_escalated counts those the judge was asked about",
    )
    n_supported: int = 0
    n_contradicted: int = 0
    n_unsupported: int = 0
    n_errors: int = Field(
        0, description="claims left without a verdict (ERROR); the combined score counts them unsupported"
    )
    n_escalated: int = Field(0, description="claims routed to the LLM judge (route 'judge')")
    n_weak: int = 0
    n_contradiction_unchecked: int = Field(0, description="claims decided without a check for contradiction")
    citation_precision: float | None = Field(
        None,
        description="share of citations that support the claim they are attached to, over the citations checked "
        "(those of unjudged claims are unknown, left out: n_citations_unchecked); None: nothing cited or checked",
    )
    citation_recall: float | None = Field(
        None,
        description="share of claims whose cited sources support them, over the claims whose citation is known; "
        "None when the answer cites nothing",
    )
    n_citations: int = _flag(0, "citation markers attached to claims")
    n_citations_supporting: int = _flag(0, "citations that support the claim they are attached to")
    n_citations_unchecked: int = _flag(0, "citations of claims that could not be judged (right or wrong)")
    # stages that were meant to run and failed (stages.score.decide: never a PASS); absent when none failed
    claims_failed: bool = _flag(
        False, "the claims call failed: the answer's sentences were checked in its place (verdict ERROR)"
    )
    n_nli_errors: int = _flag(0, "claims the NLI model could not score (each counts 0 there)")
    qa_failed: bool = _flag(False, "the QA check was meant to run and failed, asked nothing or went unanswered in part")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def not_supported_share(self) -> float | None:
        """Claims that are not SUPPORTED (CONTRADICTED, UNSUPPORTED or not judged) over all claims; None without
        claims. Computed from the counts, so report files written before it existed have it too."""
        return (self.n_claims - self.n_supported) / self.n_claims if self.n_claims else None

    def columns(self) -> dict[str, Any]:
        """Every score, count and flag by name, the computed shares too: the columns of a table (a notebook's
        DataFrame, Parquet). Unlike ``model_dump()``, the flags JSON leaves out while they are 0 / False
        (``claims_failed``, ``qa_failed``, ``n_nli_errors``, the citation counts) are always there, so that every
        run's table has the same columns and a flag reads False, never missing, where nothing failed."""
        return {name: getattr(self, name) for name in (*type(self).model_fields, *type(self).model_computed_fields)}


class AnswerReport(BaseModel):
    """Everything groundjudge found about one answer; round-trips through JSON."""

    id: str
    verdict: AnswerVerdict
    verdict_reasons: list[str] = Field(
        default_factory=list,
        description="each rule that made the verdict, with its numbers, as 'VERDICT: why' (stages.score.decide); "
        "empty in report files written before reasons were recorded",
    )
    mode: str
    scores: Scores
    claims: list[ClaimVerdict] = Field(default_factory=list)
    qa: QAResult | None = None
    usage: Usage = Field(default_factory=Usage)
    errors: list[str] = Field(default_factory=list)
    question: str | None = None
    answer: str | None = None
    contexts: list[str] = Field(default_factory=list)
    context_ids: list[str] | None = Field(None, exclude_if=_absent)
    label: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    row: int | None = None
    versions: dict[str, str] = Field(
        default_factory=dict,
        description="what made the report (Evaluator.versions): nli_model (the local model's fingerprint: weights, "
        "how they are read, device and precision), thresholds (the local decision thresholds in force), head (a "
        "verdict head's digest), evidence (how the evidence was chosen), verdict (the verdict thresholds and their "
        "preset, the weights, the weak floor and the citation precision limit), scoring (the other settings that "
        "change a report: how citation markers are read, the NLI window, the cascade's escalation of conflicts, the "
        "QA check's questions, the second judge's sample), llm and llm_server (the judge and the server it was "
        'asked at: its base URL without a user, password, query or fragment, or "the provider\'s own"), '
        "reasoning_effort (the judge client's, when it sends one), second_judge, second_judge_server and "
        "second_judge_reasoning_effort (when it sends one), and "
        "prompt.* "
        "(each prompt's version); the mode is the report's mode. Empty in an ERROR report of an answer that failed "
        "before it was scored; score --resume compares them with this run's",
    )
    sources: list[SourceInfo] | None = Field(
        None, exclude_if=lambda v: v is None, description="a conversation row: where each context comes from"
    )
    conversation: list[ConversationTurn] | None = Field(
        None, exclude_if=lambda v: v is None, description="a conversation row: its messages, for the review page"
    )
    second_judge: SecondJudging | None = Field(
        None, exclude_if=_absent, description="what the second judge did for this answer (README 'Second judge')"
    )
    judges_disagree: bool | None = Field(
        None,
        exclude_if=_absent,
        description="the second judge disagrees with a claim verdict of this answer (None: it gave none to compare)",
    )

    @model_validator(mode="after")
    def _name_sources(self) -> AnswerReport:
        """A conversation row's quotes and verdicts name the message they come from (``Quote.doc`` -> sources)."""
        if not self.sources:
            return self
        sources = self.sources

        def ref(doc: int | None, start: int | None, end: int | None) -> SourceRef | None:
            if doc is None or not 0 <= doc < len(sources):
                return None
            return SourceRef(**sources[doc].model_dump(), doc=doc, start=start, end=end)

        for c in self.claims:
            for q in c.quotes:
                q.source = ref(q.doc, q.start, q.end)
            verified = next((q.source for q in c.quotes if q.verified and q.source is not None), None)
            passage = None
            if c.nli is not None:
                passage = c.nli.contradiction_passage if c.label == "CONTRADICTED" else c.nli.entailment_passage
            if verified is None and passage is not None:
                verified = ref(passage.doc, passage.start, passage.end)
            c.source = verified if c.label in ("SUPPORTED", "CONTRADICTED") else None
        return self

    @model_validator(mode="after")
    def _error_reasons(self) -> AnswerReport:
        """An ERROR report made where no rule ran (a row that failed on the way) gives its errors as its reasons."""
        if self.verdict == "ERROR" and not self.verdict_reasons:
            self.verdict_reasons = [f"ERROR: {e}" for e in self.errors] or ["ERROR: the answer could not be evaluated"]
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def nli_pairs(self) -> int:
        """(passage, claim) pairs the NLI stage scored for this answer."""
        return sum(c.nli.passages_scored for c in self.claims if c.nli is not None)

    def _repr_html_(self) -> str:
        return report_html(self)

    @property
    def flagged(self) -> bool:
        """Worth a reviewer's look: not a clean PASS, or a claim with a flag."""
        return self.verdict != "PASS" or any(c.flags for c in self.claims)


def report_html(r: AnswerReport) -> str:
    """A compact table of one report, for notebooks."""
    from html import escape

    s = r.scores

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    head = (
        f"<b>{escape(r.id)}</b>: <b>{r.verdict}</b> (combined {f(s.combined)}, claims {f(s.claims)}, "
        f"NLI {f(s.nli)}, QA {f(s.qa)}, coverage {f(s.coverage)})"
    )
    rows = "".join(
        f"<tr><td>{escape(c.claim.text)}</td><td>{c.label}</td><td>{c.route}</td>"
        f"<td>{f(c.nli.entailment if c.nli else None)}</td><td>{escape(', '.join(c.flags))}</td>"
        f"<td>{escape(c.reason)}</td></tr>"
        for c in r.claims
    )
    table = (
        "<table><tr><th>claim</th><th>label</th><th>route</th><th>entailment</th><th>flags</th>"
        f"<th>reason</th></tr>{rows}</table>"
    )
    reasons = "".join(f"<div>{escape(reason)}</div>" for reason in r.verdict_reasons)
    errors = "".join(f"<div style='color:#c62828'>{escape(e)}</div>" for e in r.errors)
    return f"<div>{head}{reasons}{table}{errors}</div>"
