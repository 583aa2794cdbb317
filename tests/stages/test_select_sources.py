"""Issue 34: long sources reach the judge as the evidence its claims need (each passage with a margin), short ones
whole; offsets stay true and every evidence passage is shown whole."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.models import Passage
from groundjudge.stages.judge import MARGIN_CHARS, WHOLE_CHARS, select_sources

WORDS = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "1889", "metres", "the", "x"]), min_size=1)


def test_contexts_up_to_the_whole_limit_are_shown_whole() -> None:
    contexts = ["word " * (WHOLE_CHARS // 10), "more " * (WHOLE_CHARS // 10)]
    hint = Passage(doc=0, start=0, end=4, text="word")
    assert [s.text for s in select_sources(contexts, [hint])] == contexts


def test_long_contexts_show_the_evidence_with_a_margin_only() -> None:
    filler = "Unrelated text about gardening and soil. " * 500  # ~20k characters
    doc = filler + "The bridge opened in 1932 after six years of work. " + filler
    at = doc.index("The bridge")
    hint = Passage(doc=0, start=at, end=at + 50, text=doc[at : at + 50])
    (source,) = select_sources([doc], [hint])
    assert doc[source.start : source.start + len(source.text)] == source.text
    assert source.start <= at and at + 50 <= source.start + len(source.text)
    assert len(source.text) <= 50 + 2 * MARGIN_CHARS and len(source.text) >= 50 + MARGIN_CHARS
    assert source.text.startswith("Unrelated") or source.text[0] != " "  # cut at a word boundary


def test_without_hints_contexts_that_fit_the_budget_are_shown_whole() -> None:
    """The dry run asks with no hints: it prices what fits the budget, as before."""
    contexts = ["word " * (WHOLE_CHARS // 4)]
    assert [s.text for s in select_sources(contexts, [])] == contexts


@settings(max_examples=80, deadline=None)
@given(
    docs=st.lists(WORDS.map(" ".join), min_size=1, max_size=3),
    picks=st.lists(st.tuples(st.integers(0, 2), st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=5),
    margin=st.integers(0, 40),
    whole=st.integers(0, 60),
)
def test_every_evidence_passage_is_shown_whole_at_its_true_offsets(
    docs: list[str], picks: list[tuple[int, float, float]], margin: int, whole: int
) -> None:
    hints = []
    for d, a, b in picks:
        doc = d % len(docs)
        text = docs[doc]
        start, end = sorted((int(a * len(text)), int(b * len(text))))
        hints.append(Passage(doc=doc, start=start, end=end, text=text[start:end]))
    sources = select_sources(docs, hints, char_budget=10**6, whole_up_to=whole, margin=margin)
    for s in sources:
        assert docs[s.doc][s.start : s.start + len(s.text)] == s.text
    for h in hints:
        assert any(s.doc == h.doc and s.start <= h.start and h.end <= s.start + len(s.text) for s in sources)
    assert [s.number for s in sources] == list(range(1, len(sources) + 1))
    assert [(s.doc, s.start) for s in sources] == sorted((s.doc, s.start) for s in sources)
