"""Sentences and passages with character offsets.

:func:`split_sentences` cuts text into sentences (robust to abbreviations, decimals, initials and lists);
:func:`claim_sentences` keeps those that carry a checkable claim (the no-LLM claim extractor).
:func:`chunk_documents` packs each source document's sentences into passages of at most ``max_tokens`` tokens of the
NLI model's own tokenizer, with overlap, keeping every passage's character offsets in its document.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

from groundjudge.errors import ArgumentError
from groundjudge.models import Passage, Span

# Abbreviations that never end a sentence ("Dr. Smith", "e.g. this", "Fig. 3", "Jan. 5").
_NEVER_FINAL = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft lt col gen sen rep capt sgt rev hon gov pres vs v e.g i.e cf al approx
    fig figs no nos vol vols pp ed eds dept est ca op ref sec art ch eq pop incl resp viz ibid
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun
    """.split()
)
# Abbreviations that may end a sentence ("... and so on, etc. The next"): a boundary only before a usual starter.
_MAYBE_FINAL = frozenset("etc inc ltd co corp llc plc bros u.s u.k u.n e.u a.m p.m min max avg".split())
_STARTERS = frozenset(
    """the a an it its this that these those there in on at he she they we i you but however also as after for
    by his her their our some many most one two then thus so yet""".split()
)

# A sentence ends at . ! ? … (Arabic ؟, Devanagari ।) plus any closing quotes/brackets, before whitespace; or at the
# full-width marks of scripts written without spaces (。！？), before anything.
_END = re.compile(r"""([.!?…؟।]+)(["'”’)\]」』]*)(?=\s)|([。！？]+)(["'”’)\]」』]*)""")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•▪‣◦]|\d{1,3}[.)]|[a-zA-Z][.)])\s+")
_WORD = re.compile(r"[^\W_][\w'’-]*")  # any script's letters and digits
# Scripts written without spaces between words (CJK, kana, Hangul syllables used this way, Thai, Lao, Khmer, Myanmar)
_UNSPACED = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_FILLER = re.compile(
    r"^(?:sure|certainly|of course|absolutely|great question|good question|hope (?:this|that) helps|"
    r"i hope (?:this|that) helps|let me know|feel free|thanks|thank you|happy to help|in (?:summary|short|conclusion)"
    r"|here(?:'s| is| are)\b.*:$|as an ai\b|i(?:'m| am) not (?:a|able)\b)",
    re.IGNORECASE,
)


def _abbreviation_before(text: str, dot: int) -> str:
    """The lower-cased word (dots kept) that ends with the period at ``text[dot]``."""
    start = dot
    while start > 0 and (text[start - 1].isalpha() or text[start - 1] == "."):
        start -= 1
    return text[start:dot].lower()


_SPACE = re.compile(r"\s*")
_ASCII_WORD = re.compile(r"[A-Za-z]+")


def _list_marker_before(text: str, at: int) -> bool:
    r"""Whether the line holding ``text[at]`` is, up to ``at``, only a list marker ("1", "12", "b") after any spaces:
    ``re.fullmatch(r"\s*(?:\d{1,3}|[A-Za-z])", line[:at])``, read backwards from ``at`` so that the cost is the
    marker's, not the line's (a source of one 2 MB line has thousands of sentence ends)."""
    i = at
    if i > 0 and text[i - 1].isascii() and text[i - 1].isalpha():
        i -= 1
    else:
        while i > 0 and at - i < 3 and text[i - 1].isdecimal():
            i -= 1
        if i == at:
            return False
    while i > 0 and text[i - 1] != "\n" and text[i - 1].isspace():
        i -= 1
    return i == 0 or text[i - 1] == "\n"


def _ends_sentence(text: str, m: re.Match[str]) -> bool:
    if m.group(3):
        return True  # 。！？
    after = _SPACE.match(text, m.end()).end()  # type: ignore[union-attr]  # \s* always matches
    first = text[after : after + 1]
    uncased_letter = first.isalpha() and not first.islower() and not first.isupper()  # Hebrew, Arabic ...
    if first and not (first.isupper() or first.isdigit() or first in "\"'“‘([" or uncased_letter):
        return False  # "... 3.5 m. wide", "e.g. cats", "... etc. - the list"
    if m.group(1) != ".":
        return True
    if _list_marker_before(text, m.start()):
        return False  # a list marker: "1. The ..."
    word = _abbreviation_before(text, m.start(1))
    bare = word.rstrip(".")
    if not bare:
        return True
    if bare in _NEVER_FINAL or len(bare) == 1:  # titles, months, initials ("J. K. Rowling")
        return False
    if bare in _MAYBE_FINAL or ("." in bare and all(len(p) <= 1 for p in bare.split("."))):  # "U.S.", "etc."
        next_word = _ASCII_WORD.match(text, after)
        return bool(next_word and next_word.group(0).lower() in _STARTERS)
    return True


def _split_block(text: str, offset: int, out: list[Span]) -> None:
    start = 0
    for m in _END.finditer(text):
        if _ends_sentence(text, m):
            _add(text, start, m.end(), offset, out)
            start = m.end()
    _add(text, start, len(text), offset, out)


def _add(text: str, start: int, end: int, offset: int, out: list[Span]) -> None:
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    piece = piece.strip()
    if not piece:
        return
    if m := _LIST_ITEM.match(piece):
        lead += m.end()
        piece = piece[m.end() :]
    if piece:
        s = offset + start + lead
        out.append(Span(start=s, end=s + len(piece), text=piece))


def split_sentences(text: str) -> list[Span]:
    """All sentences of ``text`` with character offsets; list items and paragraphs are their own sentences."""
    out: list[Span] = []
    pos = 0
    # Blank lines always separate; a single newline separates when either line is a list item (an indented
    # line continues an item) or the line before it ends like a sentence or a heading.
    lines = text.splitlines(keepends=True)
    block_start, block = 0, ""
    for line in lines:
        starts_item = bool(_LIST_ITEM.match(line))
        prev = block.rstrip()
        in_item = bool(_LIST_ITEM.match(block)) and not line[:1].isspace()
        if block and (not line.strip() or starts_item or in_item or not prev or prev[-1] in ".!?:;…"):
            _split_block(block, block_start, out)
            block_start, block = pos, ""
        if not block:
            block_start = pos
        block += line
        pos += len(line)
    if block:
        _split_block(block, block_start, out)
    return out


def is_claim(sentence: str) -> bool:
    """Whether a sentence carries something checkable: enough words, not a question, filler or a heading."""
    s = sentence.strip()
    if s.endswith(("?", ":", "؟", "？", "：")):
        return False
    words = _WORD.findall(s)
    if len(words) < 3 and not (_UNSPACED.search(s) and len(re.findall(r"[^\W_]", s)) >= 5):
        return False  # too short; in a script written without spaces, 5 letters or digits carry a statement
    return not _FILLER.match(s)


def claim_sentences(text: str) -> list[Span]:
    """The sentences of an answer that carry claims (the claim extractor when no LLM is configured)."""
    return [s for s in split_sentences(text) if is_claim(s.text)]


def _token_offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    """Character offsets of every token, zero-width ones too (a lone SentencePiece "▁" takes a place in the model's
    window like any other token, so a passage's token count must include it)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    return [(int(a), int(b)) for a, b in enc["offset_mapping"]]


def chunk_document(text: str, doc: int, tokenizer: Any, max_tokens: int, overlap_tokens: int = 0) -> list[Passage]:
    """Pack one document's sentences into passages of at most ``max_tokens`` tokens, overlapping by up to
    ``overlap_tokens`` tokens of whole sentences; a sentence longer than a passage is cut into token windows."""
    if max_tokens < 8:
        raise ArgumentError("max_tokens must be at least 8")
    overlap_tokens = max(0, min(overlap_tokens, max_tokens // 2))
    offsets = _token_offsets(tokenizer, text)
    if not offsets:
        return []
    starts = [a for a, _ in offsets]
    ends = [b for _, b in offsets]

    def tok_range(span: Span) -> tuple[int, int]:
        # a token belongs to the sentence it ends in: SentencePiece offsets include the space before a word ("▁S")
        return bisect.bisect_right(ends, span.start), bisect.bisect_left(starts, span.end)

    # units: (first token, end token) of each sentence, long sentences pre-cut into windows
    units: list[tuple[int, int]] = []
    cut: set[int] = set()  # token windows of an overlong sentence: they start or end inside a word
    # A window that starts or ends inside a word may take a token more or two when its text is tokenized alone (a
    # SentencePiece "▁" or a word-piece split differently): passages holding one are counted again, and trimmed
    # at the end if they overflow.
    window = max_tokens
    for sent in split_sentences(text):
        a, b = tok_range(sent)
        if b <= a:
            continue
        if b - a <= max_tokens:
            units.append((a, b))
        else:
            step = max(1, window - overlap_tokens)
            for w in range(a, b, step):
                cut.add(len(units))
                units.append((w, min(b, w + window)))
                if w + window >= b:
                    break
    passages: list[Passage] = []
    i = 0
    while i < len(units):
        first, j = i, i
        while j < len(units) and units[j][1] - units[first][0] <= max_tokens:
            j += 1
        j = max(j, i + 1)
        a, b = units[first][0], units[j - 1][1]
        start, end = offsets[a][0], max(offsets[b - 1][1], offsets[a][0])
        while start < end and text[start].isspace():
            start += 1
        n_tokens = b - a
        while cut.intersection(range(first, j)):
            n_tokens = len(tokenizer(text[start:end], add_special_tokens=False, verbose=False)["input_ids"])
            if n_tokens <= max_tokens or b - a <= 1:
                break
            b = max(a + 1, b - (n_tokens - max_tokens))
            end = max(offsets[b - 1][1], offsets[a][0])
        passages.append(Passage(doc=doc, start=start, end=end, text=text[start:end], n_tokens=n_tokens))
        if j >= len(units):
            break
        # next passage starts with the trailing sentences that fit in the overlap
        k = j
        while k - 1 > i and units[j - 1][1] - units[k - 1][0] <= overlap_tokens:
            k -= 1
        i = k
    return passages


def chunk_documents(
    documents: Sequence[str], tokenizer: Any, max_tokens: int, overlap_tokens: int = 0
) -> list[Passage]:
    """Passages of every document, in order; each carries its document index and character offsets."""
    out: list[Passage] = []
    for doc, text in enumerate(documents):
        out.extend(chunk_document(text, doc, tokenizer, max_tokens, overlap_tokens))
    return out


_QUOTE_FOLD = str.maketrans(
    {"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "\u00a0": " "}
    | dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-")  # hyphens, dashes and the minus sign
)


def _fold(ch: str) -> str:
    """One character as compared ignoring case and compatibility forms: typographic quotes, hyphens, dashes and the
    minus sign folded, NFKD (ligatures such as U+FB01 become "fi"), case-folded ("ß" -> "ss"), combining marks
    dropped ("é" -> "e", U+0130 -> "i"), invisible format characters dropped (a soft hyphen, a zero-width space, bidi
    controls: text from HTML or a PDF holds them, a quote of it does not). May be empty or longer than one
    character: the caller maps every piece back to ``ch``."""
    if unicodedata.category(ch) == "Cf":
        return ""
    folded = unicodedata.normalize("NFKD", ch.translate(_QUOTE_FOLD)).casefold()
    return "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))


def _normalize_with_map(text: str) -> tuple[str, list[int]]:
    """``text`` folded (:func:`_fold`) with whitespace runs collapsed, and for each character of the result the
    index in ``text`` of the character it came from (a character that folds into several maps each piece to
    itself, so offsets stay exact for any Unicode)."""
    out: list[str] = []
    index: list[int] = []
    prev_space = True
    for i, ch in enumerate(text):
        if ch.isspace():
            if prev_space:
                continue
            out.append(" ")
            index.append(i)
            prev_space = True
            continue
        folded = _fold(ch)
        for piece in folded:
            out.append(piece)
            index.append(i)
        prev_space = prev_space and not folded  # a character that folds to nothing keeps a space run going
    if out and out[-1] == " ":
        out.pop()
        index.pop()
    return "".join(out), index


def locate(quote: str, text: str) -> tuple[int, int, Literal["exact", "normalized"]] | None:
    """Where ``quote`` stands in ``text``: exactly, else ignoring case, whitespace runs, typographic quotes and
    Unicode compatibility forms. ``text[start:end]`` is the matched text; a match that starts or ends inside a
    character that folds into several covers that whole character."""
    quote = quote.strip()
    if not quote:
        return None
    if (i := text.find(quote)) >= 0:
        return i, i + len(quote), "exact"
    norm_text, index = _normalize_with_map(text)
    norm_quote, _ = _normalize_with_map(quote)
    if not norm_quote or (j := norm_text.find(norm_quote)) < 0:
        return None
    end = index[j + len(norm_quote) - 1] + 1
    while end < len(text) and unicodedata.combining(text[end]):
        end += 1  # keep a combining mark with its base character
    return index[j], end, "normalized"
