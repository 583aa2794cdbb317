"""Citations (issue 20, section 2) and kinds of error (section 3): markers read and stripped, each claim's citation
judged, citation precision / recall, error_type from the judge and the conflict signal, and the review side."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.cache import Cache
from groundjudge.checker.signals import conflict_of
from groundjudge.config import Config
from groundjudge.errors import InputError
from groundjudge.io.rows import parse_sample
from groundjudge.models import (
    AnswerReport,
    Claim,
    ClaimNLI,
    ClaimVerdict,
    LocalThresholds,
    Passage,
    Quote,
    Scores,
    Span,
)
from groundjudge.pipeline.citing import citation_fields, route_cited
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.pipeline.work import Work
from groundjudge.review.compare import METRICS, compare_runs
from groundjudge.review.html import render_html, risk_counts, risk_key
from groundjudge.review.summary import summarize, summary_rows
from groundjudge.stages.citations import ClaimCites, claim_citations, classify, find_markers, parse_citations
from groundjudge.stages.judge import JudgeItem
from groundjudge.stages.route import Decision, local_error_type
from groundjudge.stages.score import compute_scores
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, route
from tests.conftest import make_test_client

# -- reading markers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stripped", "cited"),
    [
        ("Paris is the capital [1].", "Paris is the capital.", [[0]]),
        ("Paris is the capital[2, 3].", "Paris is the capital.", [[1, 2]]),
        ("Paris is the capital [1][3] of France.", "Paris is the capital of France.", [[0], [2]]),
        ("Paris is the capital [1-3].", "Paris is the capital.", [[0, 1, 2]]),
        ("Paris is the capital.[2]", "Paris is the capital.", [[1]]),
        ("巴黎是法国的首都【1】。", "巴黎是法国的首都。", [[0]]),
        ("Paris is the capital^2.", "Paris is the capital.", [[1]]),
        ("Paris is the capital.^1 Rome too.^3", "Paris is the capital. Rome too.", [[0], [2]]),
        ("Paris is the capital[^2].", "Paris is the capital.", [[1]]),
        ("Paris is the capital [1; 2].", "Paris is the capital.", [[0, 1]]),
        ("Paris is the capital [٣].", "Paris is the capital.", [[2]]),  # a decimal digit of another script
    ],
)
def test_every_marker_style_is_read_and_stripped(text: str, stripped: str, cited: list[list[int]]) -> None:
    parsed = parse_citations(text, 3)
    assert parsed.text == stripped
    assert [list(m.sources) for m in parsed.markers] == cited
    for m in parsed.markers:  # each marker is where it stood in the original, and nothing else was cut
        assert re.fullmatch(r"\[[^\]]+\]|【[^】]+】|\^\d+", text[m.start : m.end])


@pytest.mark.parametrize(
    "text",
    [
        "Use `x[1]` to read it.",  # inline code
        "```\nvalues[1] = 2 [1]\n```",  # a fenced code block
        'He wrote "see [1] for more" once.',  # inside a quotation
        "He wrote “see [2]” once.",
        "The value of x[1] is 3.",  # an index, not a citation
        "arr_2[1] holds it.",
        "The code 1[2]3 is odd.",  # in the middle of a number
        "Two to the ten is 2^10.",  # a power
        "Read [1](https://example.com) first.",  # a markdown link
        "[1]: https://example.com",  # a footnote definition
        "It was, he said, [sic] wrong.",  # brackets that cite nothing
        "A range [a, b] of values.",
        "Paris is big [²].",  # a digit int() cannot read (str.isdigit() takes it): the row was an ERROR, ValueError
        "The room is 20 m [³] or so [1²].",
    ],
)
def test_things_that_look_like_markers_are_not(text: str) -> None:
    parsed = parse_citations(text, 3)
    assert parsed.markers == [] and parsed.text == text


def test_a_citation_to_a_source_that_does_not_exist_is_kept_as_unknown() -> None:
    parsed = parse_citations("Rome is old [9]. Paris is big [2, 7].", 3)
    assert parsed.text == "Rome is old. Paris is big."
    assert [(m.sources, m.unknown) for m in parsed.markers] == [((), ("9",)), ((1,), ("7",))]


def test_context_ids_and_citation_styles() -> None:
    ids = ["doc-a1", "doc-b2", "7"]
    text = "Rome is old [doc-b2]. Paris is big [7]. Oslo is cold [doc-a9]. Bern is small [1]."
    auto = parse_citations(text, 3, ids)
    assert auto.text == "Rome is old. Paris is big. Oslo is cold. Bern is small."
    # an id wins over a position ([7] is the id "7", the third source); doc-a9 looks like an id and names none
    assert [(m.sources, m.unknown) for m in auto.markers] == [((1,), ()), ((2,), ()), ((), ("doc-a9",)), ((0,), ())]
    numeric = parse_citations(text, 3, ids, "numeric")  # positions only: [7] names no source, ids are no markers
    assert [(m.sources, m.unknown) for m in numeric.markers] == [((), ("7",)), ((0,), ())]
    only_ids = parse_citations(text, 3, ids, "id")
    assert [(m.sources, m.unknown) for m in only_ids.markers] == [((1,), ()), ((2,), ()), ((), ("doc-a9",))]
    assert parse_citations(text, 3, ids, "none").markers == []
    foot = parse_citations("Rome is old^2 and big [1].", 3, None, "footnote")
    assert foot.text == "Rome is old and big [1]." and [m.sources for m in foot.markers] == [(1,)]


WORD = st.text(alphabet="abcdefgxyz019", min_size=1, max_size=6)
MARK = st.sampled_from(["[1]", "[2, 3]", "[1-2]", "【2】", "^1", "[^3]", "[9]", " [1]", " [2][3]"])
GLUE = st.sampled_from([" ", ". ", ", ", "; ", "\n", " ("])


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(WORD, st.one_of(st.none(), MARK), GLUE), min_size=1, max_size=12))
def test_stripping_markers_never_changes_the_words(parts: list[tuple[str, str | None, str]]) -> None:
    """Property: the stripped text has the original's words (markers aside), in order; nothing else is removed."""
    text = "".join(w + (m or "") + g for w, m, g in parts)
    parsed = parse_citations(text, 3)
    blanked = text
    for m in reversed(parsed.markers):
        blanked = blanked[: m.start] + " " + blanked[m.end :]
    assert re.findall(r"\w+", parsed.text) == re.findall(r"\w+", blanked)
    assert re.sub(r"\s", "", parsed.text) == re.sub(r"\s", "", blanked)
    for i, ch in enumerate(parsed.text):  # every character kept is the original's, at its recorded place
        assert text[parsed.origin[i]] == ch


def test_each_claim_gets_the_markers_of_its_sentence() -> None:
    parsed = parse_citations("Paris is big [1]. Rome is old. Oslo is cold [2][3].", 3)
    sents = ["Paris is big.", "Rome is old.", "Oslo is cold."]
    claims = [Claim(id=f"c{i}", text=s) for i, s in enumerate(sents, 1)]  # no spans (an LLM's, unlocated)
    claims.append(Claim(id="c4", text="Oslo is a city.", span=None))
    cites = claim_citations(parsed, claims)
    assert [c.sources for c in cites] == [[0], [], [1, 2], [1, 2]]
    span = parsed.span_in_original(Span(start=0, end=13, text="Paris is big."))
    assert (span.start, span.end) == (0, 17) and span.text == "Paris is big [1]."


# -- what a citation is worth, and the scores ------------------------------------------------------------------


def test_classify() -> None:
    assert classify(ClaimCites(), True, set()) == "UNCITED"
    assert classify(ClaimCites([0]), True, {0}) == "CITED_SUPPORTS"
    assert classify(ClaimCites([0]), True, {1}) == "OTHER_SUPPORTS"
    assert classify(ClaimCites([0]), False, {0}) == "NOT_SUPPORTED"
    assert classify(ClaimCites([], ["9"]), True, set()) == "OTHER_SUPPORTS"


def _work(n_sources: int) -> Work:
    w = Work(sample=parse_sample({"id": "a", "answer": "x", "contexts": [f"s{i}" for i in range(n_sources)]}), row=1)
    return w


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.sets(st.integers(0, n - 1), min_size=1),  # cited
            st.sets(st.integers(0, n - 1)),  # sources the NLI stage found entailing
            st.lists(st.tuples(st.integers(0, n - 1), st.booleans())),  # judge quotes: (doc, verified)
            st.sampled_from(["SUPPORTED", "UNSUPPORTED", "CONTRADICTED", "ERROR"]),
        )
    )
)
def test_a_claim_citing_only_sources_that_do_not_support_it_is_never_cited_supports(args: Any) -> None:
    n, cited, entailing, quotes, label = args
    w = _work(n)
    w.cites = [ClaimCites(sorted(cited))]
    w.cited_support = [entailing & cited]
    qs = [Quote(text="q", doc=d, verified=v) for d, v in quotes]
    fields = citation_fields(w, 0, label, qs)
    backing = (entailing & cited) | {d for d, v in quotes if v}
    if not backing & cited or label != "SUPPORTED":
        assert fields["citation"] != "CITED_SUPPORTS"
    assert set(fields["cited_supporting"] or []) <= {d + 1 for d in cited}
    assert (fields["citation"] == "UNCHECKED") == (label == "ERROR")  # unjudged: unknown, never wrong nor right


@settings(max_examples=100, deadline=None, database=None)
@given(
    st.lists(st.floats(0, 0.89), min_size=1, max_size=3),
    st.sampled_from(["nli", "cascade"]),
)
def test_the_local_stage_never_accepts_a_citation_its_cited_source_does_not_entail(
    entailments: list[float], mode: str
) -> None:
    """Property: locally SUPPORTED, cited sources below t_support: OTHER_SUPPORTS (nli) or sent to the judge."""
    w = _work(len(entailments) + 1)
    w.claims = [Claim(id="c1", text="x")]
    w.cites = [ClaimCites(list(range(len(entailments))))]
    w.cited_nli = [{d: ClaimNLI(entailment=e, passages_scored=1) for d, e in enumerate(entailments)}]
    w.decisions = [Decision("SUPPORTED", "nli", False)]
    route_cited(w, mode=mode, thresholds=LocalThresholds(t_support=0.9, t_contradict=None))
    if mode == "cascade":
        assert w.decisions[0].route == "judge"
    else:
        assert citation_fields(w, 0, "SUPPORTED", [])["citation"] == "OTHER_SUPPORTS"


def _cv(label: str, cited: list[int], supporting: list[int], unknown: list[str] | None = None) -> ClaimVerdict:
    cites = ClaimCites([d - 1 for d in cited], unknown or [])
    good = {d - 1 for d in supporting}
    return ClaimVerdict(
        claim=Claim(id="c", text="t"),
        label=label,  # type: ignore[arg-type]
        route="nli",
        cited=cited,
        cited_unknown=unknown,
        cited_supporting=supporting,
        citation=classify(cites, label == "SUPPORTED", good),
    )


def test_citation_precision_and_recall_by_hand() -> None:
    claims = [
        _cv("SUPPORTED", [1, 2], [1]),  # 2 citations, 1 supports; the claim's cited sources support it
        _cv("SUPPORTED", [3], []),  # 1 citation, none supports (another source does): OTHER_SUPPORTS
        _cv("UNSUPPORTED", [2], []),  # 1 citation, nothing supports it
        _cv("SUPPORTED", [], [], ["9"]),  # a citation to a source that does not exist
        _cv("SUPPORTED", [], []),  # uncited
    ]
    s = compute_scores(claims, None, {"claims": 1.0}, 0.5)
    assert s.citation_precision == pytest.approx(1 / 5)  # 1 supporting citation of 2 + 1 + 1 + 1
    assert s.citation_recall == pytest.approx(1 / 5)  # only the first claim's cited sources support it
    assert [c.citation for c in claims] == [
        "CITED_SUPPORTS",
        "OTHER_SUPPORTS",
        "NOT_SUPPORTED",
        "OTHER_SUPPORTS",
        "UNCITED",
    ]
    both = compute_scores([_cv("SUPPORTED", [1, 2], [1, 2]), _cv("SUPPORTED", [1], [1])], None, {"claims": 1.0}, 0.5)
    assert (both.citation_precision, both.citation_recall) == (1.0, 1.0)
    plain = compute_scores([ClaimVerdict(claim=Claim(id="c", text="t"), label="SUPPORTED", route="nli")], None, {}, 0.5)
    assert (plain.citation_precision, plain.citation_recall) == (None, None)  # nothing cited: null, not 0


# -- rows with context objects ----------------------------------------------------------------------------------


def test_contexts_as_objects_with_ids() -> None:
    s = parse_sample({"id": "r", "answer": "a", "contexts": [{"id": "d1", "text": "one"}, {"id": 2, "text": "two"}]})
    assert s.contexts == ["one", "two"] and s.context_ids == ["d1", "2"]
    assert parse_sample({"id": "r", "answer": "a", "contexts": ["one"]}).context_ids is None


@pytest.mark.parametrize(
    ("contexts", "field", "words"),
    [
        ([{"id": "a", "text": "x"}, "plain"], "contexts[1]", "every context as an object"),
        ([{"id": "a"}], "contexts[0].text", "'text'"),
        ([{"text": "x"}], "contexts[0].id", "'id'"),
        ([{"id": " ", "text": "x"}], "contexts[0].id", "'id'"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "contexts[1].id", "repeats the id"),
    ],
)
def test_bad_context_objects_are_input_errors_naming_the_field(contexts: Any, field: str, words: str) -> None:
    with pytest.raises(InputError) as info:
        parse_sample({"id": "r", "answer": "a", "contexts": contexts}, 4)
    assert info.value.field == field and info.value.row == 4 and words in str(info.value)


# -- kinds of error ---------------------------------------------------------------------------------------------


def test_local_kinds_of_error_come_from_the_conflict_signal() -> None:
    passage = "The Eiffel Tower in Paris was completed in 1889 and is 330 metres tall."
    assert conflict_of("The Eiffel Tower in Paris is 500 metres tall.", passage)[0] == "number"  # type: ignore[index]
    assert conflict_of("The Eiffel Tower in Paris was completed in 1899.", passage)[0] == "date"  # type: ignore[index]
    may = "The bridge in Oslo opened in May 1937."
    assert conflict_of("The bridge in Oslo opened in June 1937.", may)[0] == "date"  # type: ignore[index]
    assert local_error_type("UNSUPPORTED", "number") == "number"
    assert local_error_type("UNSUPPORTED", None) == "unsupported_detail"
    assert local_error_type("CONTRADICTED", None) == "other"
    assert local_error_type("SUPPORTED", "number") is None and local_error_type("ERROR", None) is None


def test_the_judges_kind_of_error_is_read_leniently() -> None:
    item = {"claim_id": "c1", "verdict": "CONTRADICTED", "reason": "r", "quotes": []}
    assert JudgeItem(**item, error_type="Number").error_type == "number"
    assert JudgeItem(**item, error_type="made up").error_type == "other"
    assert JudgeItem(**item, error_type=None).error_type is None
    assert JudgeItem(**item).error_type is None  # an older reply without the field still reads


# -- end to end: the cascade through both SDKs, and nli mode -----------------------------------------------------

SOURCES = [
    "The Eiffel Tower is a wrought-iron tower in Paris. It was completed in 1889 for the World's Fair.",
    "The Colosseum is an ancient amphitheatre in the centre of Rome. It opened in 80 AD under Titus.",
    "Mount Fuji is the highest mountain in Japan, at 3,776 metres.",
]
ANSWER = (
    "The Eiffel Tower was completed in 1889 [1]. The Colosseum is in Rome [1]. Mount Fuji is in Japan. "
    "The Louvre opened in 1793 [2]. The Colosseum opened in 80 AD [9]. Mount Fuji is 4,000 metres high [3]."
)
# what the scripted judge says of each claim: verdict, (source, quote), error_type
JUDGE = {
    "The Eiffel Tower was completed in 1889.": ("SUPPORTED", (1, "completed in 1889 for the World's Fair"), None),
    "The Colosseum is in Rome.": ("SUPPORTED", (2, "amphitheatre in the centre of Rome"), None),
    "Mount Fuji is in Japan.": ("SUPPORTED", (3, "the highest mountain in Japan"), None),
    "The Louvre opened in 1793.": ("UNSUPPORTED", None, "unsupported_detail"),
    "The Colosseum opened in 80 AD.": ("SUPPORTED", (2, "It opened in 80 AD under Titus"), None),
    "Mount Fuji is 4,000 metres high.": ("CONTRADICTED", (3, "at 3,776 metres"), "Number"),
}


def claims_reply(req: RecordedRequest) -> Reply:
    assert "[1]" not in req.last_user and "[9]" not in req.last_user  # the extractor never sees the markers
    return Reply.json({"claims": [{"text": t, "source": t} for t in JUDGE]})


def judge_reply(req: RecordedRequest) -> Reply:
    verdicts = []
    for cid, shown in claims_in(req).items():
        text = shown.split(" (cites:")[0]
        verdict, quote, kind = JUDGE[text]
        quotes = [{"source": quote[0], "text": quote[1]}] if quote else []
        verdicts.append({"claim_id": cid, "verdict": verdict, "reason": "r", "quotes": quotes, "error_type": kind})
    return Reply.json({"verdicts": verdicts})


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_cited_answer_through_the_cascade(provider: str, shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route({"claims": claims_reply, "judge": judge_reply})) as server:
        cache = Cache(tmp_path / "cache")
        client = make_test_client(server, provider, cache=cache)
        cfg = Config(qa=False, t_support=0.99, t_contradict=0.99, t_unsupported=0.0, use_head=False)
        ev = Evaluator(cfg, nli=shared_nli, client=client, cache=cache)
        report = ev.evaluate(ANSWER, SOURCES)
        judge_prompt = claims_in(server.requests[-1])
    assert "(cites: SOURCE 1)" in judge_prompt["c1"] and "(cites: SOURCE 2)" in judge_prompt["c4"]
    assert "cites" not in judge_prompt["c3"]
    by_text = {c.claim.text: c for c in report.claims}
    got = {t: (c.label, c.cited, c.cited_supporting, c.citation, c.error_type) for t, c in by_text.items()}
    assert got == {
        "The Eiffel Tower was completed in 1889.": ("SUPPORTED", [1], [1], "CITED_SUPPORTS", None),
        "The Colosseum is in Rome.": ("SUPPORTED", [1], [], "OTHER_SUPPORTS", None),
        "Mount Fuji is in Japan.": ("SUPPORTED", [], [], "UNCITED", None),
        "The Louvre opened in 1793.": ("UNSUPPORTED", [2], [], "NOT_SUPPORTED", "unsupported_detail"),
        "The Colosseum opened in 80 AD.": ("SUPPORTED", [], [], "OTHER_SUPPORTS", None),
        "Mount Fuji is 4,000 metres high.": ("CONTRADICTED", [3], [], "NOT_SUPPORTED", "number"),
    }
    unknown = by_text["The Colosseum opened in 80 AD."]
    assert unknown.cited_unknown == ["9"] and "unknown_citation" in unknown.flags  # a per-claim error, no crash
    assert report.verdict != "ERROR" and not report.errors
    # citations: 1 + 1 + 1 + 1 (the unknown [9]) + 1 = 5, of which 1 supports; 1 of 6 claims CITED_SUPPORTS
    assert report.scores.citation_precision == pytest.approx(1 / 5)
    assert report.scores.citation_recall == pytest.approx(1 / 6)
    eiffel = by_text["The Eiffel Tower was completed in 1889."]
    assert eiffel.claim.span is not None and ANSWER[eiffel.claim.span.start : eiffel.claim.span.end].endswith("[1].")
    again = AnswerReport.model_validate_json(report.model_dump_json())
    assert again.claims == report.claims and again.scores == report.scores


def test_nli_mode_cites_and_names_kinds_of_error(shared_nli: Any, tmp_path: Path) -> None:
    ev = Evaluator(Config(mode="nli", cache_dir=str(tmp_path / "c"), use_head=False), nli=shared_nli)
    rows = [
        {
            "id": "ids",
            "answer": "The Eiffel Tower was completed in 1889 [eiffel]. The Colosseum is in Rome [eiffel]. "
            "The Colosseum opened in 80 AD [doc-9].",
            "contexts": [{"id": "eiffel", "text": SOURCES[0]}, {"id": "doc-2", "text": SOURCES[1]}],
        },
        {"id": "plain", "answer": "The Eiffel Tower was completed in 1899.", "contexts": [SOURCES[0]]},
    ]
    cited, plain = list(ev.evaluate_many(rows))
    assert cited.context_ids == ["eiffel", "doc-2"]
    first, second, third = cited.claims
    assert (first.cited, first.citation) == ([1], "CITED_SUPPORTS")
    assert second.cited == [1] and second.citation in ("OTHER_SUPPORTS", "NOT_SUPPORTED")
    assert third.cited_unknown == ["doc-9"] and third.citation != "CITED_SUPPORTS"
    assert plain.claims[0].label != "SUPPORTED" and plain.claims[0].error_type == "date"
    assert plain.claims[0].citation is None and plain.scores.citation_precision is None
    # an answer citing nothing: no new keys (versions.verdict names the run's min_citation_precision, a setting)
    assert "citation" not in plain.model_dump_json(exclude={"scores", "versions"})


# -- the review side --------------------------------------------------------------------------------------------


def _report(rid: str, claims: list[ClaimVerdict], verdict: str = "PASS") -> AnswerReport:
    scores = compute_scores(claims, None, {"claims": 1.0}, 0.5)
    return AnswerReport(id=rid, verdict=verdict, mode="nli", scores=scores, claims=claims)  # type: ignore[arg-type]


def _typed(label: str, kind: str | None) -> ClaimVerdict:
    return ClaimVerdict(claim=Claim(id="c", text="t"), label=label, route="nli", error_type=kind)  # type: ignore[arg-type]


def test_summary_compare_and_review_page() -> None:
    a = [
        _report("x", [_cv("SUPPORTED", [1], [1]), _typed("UNSUPPORTED", "number")]),
        _report("y", [_typed("CONTRADICTED", "date")]),
    ]
    b = [
        _report("x", [_cv("SUPPORTED", [1], []), _typed("UNSUPPORTED", "number")]),
        _report("y", [_typed("CONTRADICTED", "number")]),
    ]
    s = summarize(b)
    assert s.error_types == {"number": 2} and s.answers_citing == 1 and s.citations == {"OTHER_SUPPORTS": 1}
    assert s.mean_citation_precision == 0.0 and s.mean_citation_recall == 0.0
    rows = dict(summary_rows(s))
    assert rows["errors by kind"] == "number 2" and rows["citation precision / recall"].startswith(
        "0.000 [0.000, 0.000] / 0.000 [0.000, 0.000]"
    )
    result = compare_runs(a, b)
    assert {"citation_precision", "citation_recall"} <= set(METRICS)
    assert result["metrics"]["citation_precision"]["diff"] == -1.0
    assert result["error_types"] == {"date": {"a": 1, "b": 0, "diff": -1}, "number": {"a": 1, "b": 2, "diff": 1}}
    page = render_html(b)
    assert "error-type" in page and "data.reports.flatMap" in page
    # a wrong citation puts a PASS answer without flags ahead of a clean one
    clean = _report("clean", [_cv("SUPPORTED", [1], [1])])
    wrong = _report("wrong", [_cv("SUPPORTED", [1], [])])
    assert risk_key(wrong) < risk_key(clean)


def test_scores_keys() -> None:
    assert {"citation_precision", "citation_recall"} <= set(Scores.model_fields)


def test_find_markers_ignores_a_passage_of_nothing() -> None:
    assert find_markers("", 3) == [] and parse_citations("[1]", 0).markers[0].unknown == ("1",)
    assert Passage(doc=0, start=0, end=1, text="x").doc == 0


def test_context_objects_from_a_csv_cell(tmp_path: Path) -> None:
    import csv
    import json

    from groundjudge.io.tables import read_rows

    path = tmp_path / "rows.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "answer", "contexts"])
        w.writerow(["r1", "Rome is old [d2].", json.dumps([{"id": "d1", "text": "one"}, {"id": "d2", "text": "two"}])])
    (n, row), *_ = list(read_rows(path))
    sample = parse_sample(row, n)
    assert sample.contexts == ["one", "two"] and sample.context_ids == ["d1", "d2"]
    assert [m.sources for m in parse_citations(sample.answer or "", 2, sample.context_ids).markers] == [(1,)]


@pytest.mark.parametrize(
    ("label", "cites", "entail", "route"),
    [
        ("UNSUPPORTED", ClaimCites([0]), 0.1, "judge"),  # the judge checks a cited claim the model does not find
        ("CONTRADICTED", ClaimCites([0]), 0.1, "nli"),  # a confident local finding stands
        ("SUPPORTED", ClaimCites([], ["9"]), 0.0, "nli"),  # only a source that does not exist: wrong anyway
        ("SUPPORTED", ClaimCites([0]), 0.95, "nli"),  # the cited source entails it: decided locally
        ("SUPPORTED", ClaimCites([0]), 0.5, "judge"),  # another source does: the judge says which
    ],
)
def test_which_cited_claims_the_cascade_sends_to_the_judge(
    label: str, cites: ClaimCites, entail: float, route: str
) -> None:
    w = _work(2)
    w.claims = [Claim(id="c1", text="x")]
    w.cites = [cites]
    w.cited_nli = [{d: ClaimNLI(entailment=entail, passages_scored=1) for d in cites.sources}]
    w.decisions = [Decision(label, "nli", True)]  # type: ignore[arg-type]
    route_cited(w, mode="cascade", thresholds=LocalThresholds(t_support=0.9, t_contradict=0.9))
    assert w.decisions[0].route == route


# -- issue 29: markers after a number, inch marks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stripped", "cited"),
    [
        ("It runs iOS 4[1].", "It runs iOS 4.", [[0]]),
        (
            "The phone came out in June 2010[2] with iOS 4[1].",
            "The phone came out in June 2010 with iOS 4.",
            [[1], [0]],
        ),
        (
            'It has a 12" screen [1]. The other has a 14" one [2].',
            'It has a 12" screen. The other has a 14" one.',
            [[0], [1]],
        ),
        ('A 12" screen[1] and a 14" screen[2].', 'A 12" screen and a 14" screen.', [[0], [1]]),
    ],
)
def test_a_marker_after_a_number_or_between_inch_marks_is_read(
    text: str, stripped: str, cited: list[list[int]]
) -> None:
    """Reproduced from outside: ``iOS 4[1]`` was read as an index (like ``x[1]``) and ``12" ... 14"`` as a quoted
    passage; the marker stayed in the claim's text and the claim was UNCITED."""
    parsed = parse_citations(text, 3)
    assert parsed.text == stripped
    assert [list(m.sources) for m in parsed.markers] == cited


TOKEN = st.one_of(
    st.text(alphabet="abcdefgxyzABC", min_size=2, max_size=6),  # a word (one letter alone may be an index: x[1])
    st.from_regex(r"[0-9]{1,4}", fullmatch=True),  # a number
    st.from_regex(r"[0-9]{1,2}[\"']", fullmatch=True),  # inches and feet: 12" 5'
    st.from_regex(r"[0-9]{1,3}(%|\.[0-9])", fullmatch=True),
    st.sampled_from(["iOS", "4G", "COVID-19", "v2.1", "(2010)", "Wi-Fi", "e.g.", "Paris,"]),
)
CITE = st.sampled_from(["[1]", "[2]", "[1, 3]", " [2]", "[1][3]", "【2】"])


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.lists(
        st.tuples(TOKEN, st.one_of(st.none(), CITE), st.sampled_from([" ", ". ", ", ", "; "])), min_size=1, max_size=10
    )
)
def test_a_marker_after_any_token_is_read_and_no_marker_text_stays(parts: list[tuple[str, str | None, str]]) -> None:
    """Property: a marker right after any token (a word, a number, an inch mark, a version) is read as a citation
    of the sources it names, and no marker text is left in the text the claims come from."""
    text = "".join(t + (m or "") + g for t, m, g in parts)
    parsed = parse_citations(text, 3)
    wanted = [n for _, m, _ in parts if m for n in re.findall(r"\d", m)]
    assert [str(s + 1) for mk in parsed.markers for s in mk.sources] == wanted, (text, parsed.text)
    assert "[" not in parsed.text and "【" not in parsed.text, (text, parsed.text)


# -- issue 29: an unjudged claim's citation is unknown, not wrong; a threshold on citation precision -----------------


def test_an_unjudged_claims_citation_is_unchecked_not_wrong() -> None:
    """Reproduced from outside: a cited claim whose judge call failed (ERROR) got ``citation: NOT_SUPPORTED``,
    citation precision and recall 0.0, and counted as a wrong citation in the summary and the review queue."""
    w = _work(2)
    w.cites = [ClaimCites([0]), ClaimCites([1])]
    w.cited_support = [set(), set()]
    unjudged = citation_fields(w, 0, "ERROR", [])
    assert unjudged["citation"] == "UNCHECKED" and unjudged["cited"] == [1] and unjudged["cited_supporting"] is None
    good = citation_fields(w, 1, "SUPPORTED", [Quote(text="q", doc=1, verified=True)])
    assert good["citation"] == "CITED_SUPPORTS"
    cvs = [
        ClaimVerdict(claim=Claim(id="c1", text="t"), label="ERROR", route="judge", **unjudged),
        ClaimVerdict(claim=Claim(id="c2", text="t"), label="SUPPORTED", route="judge", **good),
    ]
    s = compute_scores(cvs, None, {"claims": 1.0}, 0.5)
    # the unjudged claim's citation is left out of both (unknown); the scores say how many were left out
    assert (s.citation_precision, s.citation_recall) == (1.0, 1.0)
    assert (s.n_citations, s.n_citations_supporting, s.n_citations_unchecked) == (2, 1, 1)
    only = compute_scores(cvs[:1], None, {"claims": 1.0}, 0.5)
    assert (only.citation_precision, only.citation_recall) == (None, None)  # nothing checked: no score, not 0
    report = AnswerReport(id="a", verdict="WARN", mode="cascade", scores=s, claims=cvs)
    assert summarize([report]).citations == {"UNCHECKED": 1, "CITED_SUPPORTS": 1}
    assert risk_counts(report)["wrong_citation"] == 0  # not a wrong citation in the review queue
    # a marker naming no source is wrong whatever the judge says: it still counts against precision
    unknown = ClaimCites([], ["9"])
    w.cites = [unknown, ClaimCites([1])]
    assert citation_fields(w, 0, "ERROR", [])["citation"] == "NOT_SUPPORTED"


def _decide_cited(precision_limit: float | None, cvs: list[ClaimVerdict]) -> Any:
    from groundjudge.config import Thresholds
    from groundjudge.stages.score import decide

    s = compute_scores(cvs, None, {"claims": 1.0}, 0.5)
    return decide(s, Thresholds(), {"claims": 1.0}, None, min_citation_precision=precision_limit)


def test_a_threshold_on_citation_precision_makes_a_wrong_citation_fail() -> None:
    """Reproduced from outside: a claim citing [1] but supported only by [2] still PASSed 0.968. With
    ``min_citation_precision`` the verdict rule fails it; off by default."""
    right = _cv("SUPPORTED", [1], [1])
    wrong = _cv("SUPPORTED", [1], [])  # supported, but only by a source it does not cite: OTHER_SUPPORTS
    assert wrong.citation == "OTHER_SUPPORTS"
    cvs = [right, wrong] + [_cv("SUPPORTED", [], []) for _ in range(2)]
    assert _decide_cited(None, cvs).verdict == "PASS"  # off by default: a wrong citation alone never fails
    ruling = _decide_cited(0.8, cvs)
    assert ruling.verdict == "FAIL" and any("citation precision 0.50 < 0.80" in r for r in ruling.reasons), ruling
    assert _decide_cited(0.5, cvs).verdict == "PASS"
    assert _decide_cited(1.0, [right, _cv("SUPPORTED", [], [])]).verdict == "PASS"
    assert _decide_cited(1.0, [_cv("SUPPORTED", [], [])] * 2).verdict == "PASS"  # nothing cited: nothing wrong


def test_unchecked_citations_that_could_break_the_precision_limit_leave_the_answer_undecided() -> None:
    """As with the contradicted share: a failure never decides in the answer's favour. Unchecked citations that,
    wrong, would put citation precision below its limit make the answer ERROR, never PASS or WARN."""
    w = _work(2)
    w.cites = [ClaimCites([0])]
    w.cited_support = [set()]
    unjudged = ClaimVerdict(
        claim=Claim(id="c9", text="t"), label="ERROR", route="judge", **citation_fields(w, 0, "ERROR", [])
    )
    cvs = [_cv("SUPPORTED", [1], [1])] + [_cv("SUPPORTED", [], [])] * 8 + [unjudged]
    ruling = _decide_cited(0.8, cvs)
    assert ruling.verdict == "ERROR" and any("citation" in r for r in ruling.reasons), ruling
    assert _decide_cited(0.5, cvs).verdict != "PASS"  # 1 of 2 citations at worst: the limit holds, coverage WARNs


def test_min_citation_precision_fails_a_wrong_citation_end_to_end(shared_nli: Any, tmp_path: Path) -> None:
    """The config's ``min_citation_precision`` reaches the verdict: a claim citing [2] but supported only by [1]."""
    answer = "The Eiffel Tower was completed in 1889 [2]. Mount Fuji is in Japan [3]."
    texts = ["The Eiffel Tower was completed in 1889.", "Mount Fuji is in Japan."]
    claims = lambda req: Reply.json({"claims": [{"text": t, "source": t} for t in texts]})  # noqa: E731
    verdicts = {}
    with ScriptedLLMServer(route({"claims": claims, "judge": judge_reply})) as server:
        for limit in (None, 0.8):
            cache = Cache(tmp_path / "cache")
            client = make_test_client(server, cache=cache)
            cfg = Config(qa=False, t_support=0.99, use_head=False, min_citation_precision=limit)
            report = Evaluator(cfg, nli=shared_nli, client=client, cache=cache).evaluate(answer, SOURCES)
            verdicts[limit] = report.verdict, report.verdict_reasons
            assert [c.citation for c in report.claims] == ["OTHER_SUPPORTS", "CITED_SUPPORTS"]
            assert report.scores.citation_precision == 0.5
    assert verdicts[None][0] == "PASS"
    assert verdicts[0.8][0] == "FAIL" and "FAIL: citation precision 0.50 < 0.80" in verdicts[0.8][1][0], verdicts
