"""The row contract and the id rule, shared by every reader, command and engine.

``parse_sample`` turns an input row into a :class:`~groundjudge.models.Sample` or an :class:`InputError` naming the
row and field; ``row_id`` is the id a row's report gets; ``unique_rows`` is the rule for repeated ids; ``batches``
cuts numbered rows into the batches an evaluator scores together (both engines cut them here, so the NLI stage
sees the same batches and its numbers match to the last digit).

Imports only ``models`` and ``errors``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from groundjudge.errors import InputError
from groundjudge.io.conversations import parse_conversation
from groundjudge.io.ids import id_text
from groundjudge.io.labels import gold_label
from groundjudge.models import Sample


def row_id(row: Any, row_number: int | None) -> str:
    """The id a row's report gets: its own "id" (:func:`id_text`), else ``row-N`` (so that --resume recognises it);
    ``row-N`` too for an id :func:`id_text` refuses (:func:`parse_sample` makes that row an InputError)."""
    try:
        rid = id_text(row.get("id") if isinstance(row, dict) else None)
    except InputError:
        rid = None
    if rid is None or rid.strip() == "":
        return f"row-{row_number}"
    # an id that is not valid Unicode (a lone surrogate) is written escaped, the same way every time
    return rid.encode("utf-8", "backslashreplace").decode("utf-8")


def check_text(value: str | None, row: int | None, field: str) -> None:
    """A lone surrogate (JSON allows "\\ud800") is not text: no tokenizer or file can take it."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"is not valid Unicode text: a lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start}",
            row=row,
            field=field,
        ) from None


CONTEXTS_STRING = (
    'is a string, not a list of strings: wrap it in a list (["..."], in a CSV cell as JSON), or give one passage '
    "as 'context' (a key or column named context, or --map context=COLUMN)"
)


def context_objects(contexts: Any, row: int | None) -> tuple[Any, list[str] | None]:
    """Contexts given as objects ``{"id", "text"}`` (citation markers may name the ids): their texts and ids.
    A list of strings, or anything else, comes back as it is, with no ids (``parse_sample`` checks it)."""
    if not isinstance(contexts, list) or not any(isinstance(c, dict) for c in contexts):
        return contexts, None
    texts: list[str] = []
    ids: list[str] = []
    for i, c in enumerate(contexts):
        field = f"contexts[{i}]"
        if not isinstance(c, dict):
            raise InputError(
                f"is a {type(c).__name__} among objects: give every context as an object {{'id', 'text'}}, or "
                "every one as a string",
                row=row,
                field=field,
            )
        text = c.get("text")
        if not isinstance(text, str):
            raise InputError("needs a 'text' string", row=row, field=f"{field}.text")
        try:
            cid = id_text(c.get("id"))
        except InputError as exc:
            raise InputError(exc.reason, row=row, field=f"{field}.id") from None
        if cid is None or not cid.strip():
            raise InputError("needs an 'id' (a string or a number)", row=row, field=f"{field}.id")
        cid = cid.strip()
        if cid in ids:
            raise InputError(
                f"repeats the id {cid!r} of contexts[{ids.index(cid)}]: citations could not tell them apart",
                row=row,
                field=f"{field}.id",
            )
        check_text(cid, row, f"{field}.id")
        texts.append(text)
        ids.append(cid)
    return texts, ids


def parse_sample(row: Any, row_number: int | None = None) -> Sample:
    """A validated :class:`Sample` from an input row; a bad row is an :class:`InputError` naming row and field.

    ``contexts`` is a list of strings, or of objects ``{"id", "text"}`` whose ids citation markers may name
    (:func:`context_objects`): a plain string there is a mistyped field, an InputError (a string that was
    meant as a list is not quietly taken for one passage). One passage may be given as a string under the singular
    name ``context``. A gold ``label`` is read by the one label rule (:func:`groundjudge.io.labels.gold_label`):
    trimmed and in its one case, none if empty, an InputError if it is no label (a typo is never taken for none).
    """
    if isinstance(row, Sample):  # made in Python: its label by the same rule
        label = gold_label(row.label, row_number)
        return row if label == row.label else row.model_copy(update={"label": label})
    if not isinstance(row, dict):
        raise InputError(f"a row must be a JSON object, not {type(row).__name__}", row=row_number)
    conversation = None
    # the first field read after the id: a row io.tables found bad (InvalidRow) raises its own error here
    if row.get("messages") is not None:  # a conversation or agent trace: its answer and evidence, with provenance
        for name in ("answer", "claim"):
            if row.get(name) is not None:
                raise InputError(f"give either 'messages' or '{name}', not both", row=row_number, field=name)
        conversation = parse_conversation(row, row_number)
        row = {**row, "answer": conversation.answer, "contexts": conversation.contexts}
        row["question"] = row.get("question") if row.get("question") is not None else conversation.question
    try:
        id_text(row.get("id"))
    except InputError as exc:
        raise InputError(exc.reason, row=row_number, field="id") from None
    if row.get("contexts") is None and "context" in row:
        contexts = row.get("context")
        if isinstance(contexts, str):  # the singular name: one passage
            contexts = [contexts]
    else:
        contexts = row.get("contexts")
        if isinstance(contexts, str):
            raise InputError(CONTEXTS_STRING, row=row_number, field="contexts")
    contexts, context_ids = context_objects(contexts, row_number)
    if not isinstance(contexts, list):
        raise InputError(f"must be a list of strings, not {_kind(contexts)}", row=row_number, field="contexts")
    if (bad := next((i for i, c in enumerate(contexts) if not isinstance(c, str)), None)) is not None:
        raise InputError(
            f"must be a list of strings: contexts[{bad}] is {_kind(contexts[bad])}, not a string",
            row=row_number,
            field="contexts",
        )
    if not any(c.strip() for c in contexts):
        raise InputError("is empty: there is nothing to check the answer against", row=row_number, field="contexts")
    answer, claim = row.get("answer"), row.get("claim")
    if answer is None and claim is None:
        raise InputError("a row needs an 'answer' or a 'claim'", row=row_number, field="answer")
    if answer is not None and claim is not None:
        raise InputError("give either 'answer' or 'claim', not both", row=row_number, field="claim")
    for name, value in (("answer", answer), ("claim", claim), ("question", row.get("question"))):
        if value is not None and not isinstance(value, str):
            raise InputError(f"must be a string, not {type(value).__name__}", row=row_number, field=name)
    if claim is not None and not claim.strip():
        raise InputError("is empty", row=row_number, field="claim")
    for name, value in (("answer", answer), ("claim", claim), ("question", row.get("question"))):
        check_text(value, row_number, name)
    for i, context in enumerate(contexts):
        check_text(context, row_number, f"contexts[{i}]")
    metadata = row.get("metadata")
    metadata = {} if metadata is None else metadata  # not `or {}`: a list, "" or 0 is a mistyped field, not none
    if not isinstance(metadata, dict):
        raise InputError("must be an object", row=row_number, field="metadata")
    try:  # passed through to the report, so it must be writable: no NaN, no lone surrogate
        json.dumps(metadata, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        raise InputError(f"cannot be written back: {exc}", row=row_number, field="metadata") from None
    label = gold_label(row.get("label"), row_number)  # the one label rule: a typo is the row's error, not no label
    return Sample(
        id=row_id(row, row_number),
        contexts=contexts,
        context_ids=context_ids,
        answer=answer,
        claim=claim,
        question=row.get("question"),
        label=label,
        metadata=metadata,
        sources=conversation and conversation.sources,
        conversation=conversation and conversation.turns,
    )


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def unique_rows(rows: Iterable[tuple[int, Any]], skip: set[str]) -> Iterator[tuple[int, Any]]:
    """The rule for ids, shared by both engines: a row that repeats an earlier row's id is an InputError (its report
    id ``row-N``, so the first keeps its own), decided while streaming over every row, skipped or not; rows whose
    id is in ``skip`` are left out."""
    seen: dict[str, int] = {}
    for n, row in rows:
        rid = row_id(row, n)
        if rid in seen:
            row = InputError(f"duplicate id {rid!r}: row {seen[rid]} has it already", row=n, field="id")
            rid = row_id(row, n)
        seen.setdefault(rid, n)
        if rid not in skip:
            yield n, row


def batches(rows: Iterable[tuple[int, Any]], batch_size: int) -> Iterator[list[tuple[int, Any, Sample | InputError]]]:
    """``(row number, row, its Sample or InputError)``, cut after every ``batch_size`` rows that parse; a bad row
    rides with the batch it falls in. The one batch cutter of both engines, so that each Ray actor call scores
    exactly a batch of the local engine (the NLI stage batches across a batch's rows; cut elsewhere, its numbers
    could differ in the last digits)."""
    batch: list[tuple[int, Any, Sample | InputError]] = []
    valid = 0
    for n, row in rows:
        parsed: Sample | InputError
        try:
            parsed = parse_sample(row, n) if not isinstance(row, InputError) else row
        except InputError as exc:
            parsed = exc
        batch.append((n, row, parsed))
        valid += not isinstance(parsed, InputError)
        if valid >= batch_size:
            yield batch
            batch, valid = [], 0
    if batch:
        yield batch
