"""Sentence splitting (``groundjudge.chunking``): a long source costs time in proportion to its length.

A source of one 2 MB line (a scraped page, a log) has tens of thousands of sentence ends, and deciding each one
looked at the whole rest of the text and back to the line's start: 20-40 s of CPU per answer, quadratic in the
length. The check now reads only the characters next to each end; these tests hold it to the reading it replaced
(the slicing definition below, over generated text) and to linear time.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge import chunking
from groundjudge.chunking import split_sentences


def ends_sentence_by_slicing(text: str, m: re.Match[str]) -> bool:
    """The definition: the rest of the text after the end, and the line up to it, as slices."""
    if m.group(3):
        return True
    rest = text[m.end() :].lstrip()
    uncased_letter = rest[:1].isalpha() and not rest[:1].islower() and not rest[:1].isupper()
    if rest and not (rest[0].isupper() or rest[0].isdigit() or rest[0] in "\"'“‘([" or uncased_letter):
        return False
    if m.group(1) != ".":
        return True
    line_start = text.rfind("\n", 0, m.start()) + 1
    if re.fullmatch(r"\s*(?:\d{1,3}|[A-Za-z])", text[line_start : m.start()]):
        return False
    bare = chunking._abbreviation_before(text, m.start(1)).rstrip(".")
    if not bare:
        return True
    if bare in chunking._NEVER_FINAL or len(bare) == 1:
        return False
    if bare in chunking._MAYBE_FINAL or ("." in bare and all(len(p) <= 1 for p in bare.split("."))):
        next_word = re.match(r"[A-Za-z]+", rest)
        return bool(next_word and next_word.group(0).lower() in chunking._STARTERS)
    return True


PIECES = st.sampled_from(
    [
        "a", "Z", " ", "  ", "\n", "\n\n", "\t", "\r", "\u2028", "\u00a0", ".", "!", "?", "…", '"', "'", ")", "(",
        "“", "1", "12", "123", "1234", "٣", "²", "Ⅷ", "x.", "b)", "- ", "* ", "• ", "etc. The", "U.S. the",
        "Dr. ", "1. ", "\n2. ", "  a. ", "12. ", "1234. ", "e.g. cats", " 3.5 m. wide", "。", "！", "Hello world",
        "שלום. ", "مرحبا. ", "The end. It", "Jan. 5", "J. K. Rowling",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=40).map("".join))
def test_sentences_are_those_of_the_slicing_definition(text: str) -> None:
    fast = split_sentences(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chunking, "_ends_sentence", ends_sentence_by_slicing)
        assert split_sentences(text) == fast


def test_a_long_line_is_split_in_linear_time() -> None:
    """8 times the text costs about 8 times the time (it cost 64 times: 40 s for a 2 MB line)."""
    line = "Filler sentence number 7 is here. " * 12_000  # 408,000 characters, one line, 12,000 sentence ends

    def cpu(text: str) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            split_sentences(text)
            best = min(best, time.process_time() - start)
        return best

    small, large = cpu(line[: len(line) // 8]), cpu(line)
    assert len(split_sentences(line)) == 12_000
    assert large < 24 * max(small, 1e-3), (small, large)
