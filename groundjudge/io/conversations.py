"""A conversation or agent trace as a row: ``messages`` in, an answer and its evidence (with provenance) out.

A row may carry ``messages`` instead of ``answer`` + ``contexts``. Read here, in one place, for
:func:`groundjudge.io.rows.parse_sample`; nothing after it knows the row was a conversation except the report's
``sources`` / ``conversation`` fields and the review page.

Wire formats, told apart per message:

- OpenAI chat: ``system`` / ``developer``, ``user``, ``assistant`` (``tool_calls``), ``tool`` (``tool_call_id``),
  legacy ``function``; ``content`` a string, None or a list of parts (``{"type": "text", "text": ...}``; parts
  without text, such as images, are left out; a ``refusal`` part, or an assistant message's ``refusal`` or audio
  ``transcript`` where it has no text content, is its text; audio with no transcript is an InputError).
- OpenAI Responses API items: messages (``{"type": "message", "role": ...}``, ``input_text`` / ``output_text``
  parts), ``function_call`` (``call_id``, ``name``), ``function_call_output`` (a tool result), ``reasoning`` and
  ``web_search_call`` (left out: no text to check against); any other item is an InputError naming its type.
- Anthropic messages: ``content`` a string or a list of blocks: ``text``, ``tool_use`` (``id``, ``name``),
  ``tool_result`` (``tool_use_id``, ``content`` a string or blocks, search results and text documents among them
  read as its text), ``document`` (a retrieved document, text
  source), ``thinking`` (left out); the system prompt is a ``system`` message.
- RAGAS multi-turn (``type``: ``human``, ``ai`` with ``tool_calls``, ``tool``, ``system``).
- DeepEval conversational turns (``role``, ``content``, ``retrieval_context``, ``tools_called``).
- Gemini's ``parts`` are not read: a message with ``parts`` and no ``content`` is an InputError.

Which text is what:

- The answer is the text of the last assistant turn that has text (``conversation_options.turn`` = k picks the k-th
  such turn, from 1); it is judged against what came before it only. :func:`each_turn` makes one row per assistant
  turn, ids ``<id>#turn<k>``.
- Evidence: tool results (each one whole: several parts are joined by a blank line; JSON stays as its text, or is
  written as JSON when a tool's output is structured: a list holding an object that is no content part this reader
  knows, such as ``{"type": "flight", ...}``, is the tool's own JSON), retrieved documents (Anthropic ``document``
  blocks, DeepEval ``retrieval_context``, and the row's own ``contexts``); a tool result or document block in an
  assistant or system message is an InputError (that speaker's own text). User turns only with
  ``conversation_options.user_evidence``, the system prompt only with ``conversation_options.system_evidence``.
  The assistant's own turns are never evidence.
- A tool result whose ``tool_call_id`` matches no earlier tool call is kept as evidence (it is still what a tool
  returned), with a ``note`` on its source saying so.
- What a tool result repeats of the assistant's own words is not evidence: any stretch of at least
  :data:`ECHO_MIN_CHARS` characters that also stands in an earlier assistant turn's text or in the arguments of an
  earlier tool call (each string in them, also as JSON writes it), and that no earlier evidence held (the assistant
  quoting a tool is not its own text), is blanked in the context: each of its characters but line breaks becomes a
  space, so the context keeps the message's length and every offset in it is the message's; its source's ``note``
  says how many characters. A tool that echoes the draft it was sent, or returns the conversation so far, then
  supports nothing of it. Matching is exact (a paraphrase, or an echo shorter than the minimum, is not caught).
- The question, unless the row gives one, is the text of the last user turn before the answer.

Each context carries a :class:`~groundjudge.models.SourceInfo`: the message index, role, tool call id, tool name and
part; the context's text is exactly that source's text (:func:`source_text`) but for echoes blanked, which keep its
length, so a quote's ``start``/``end`` in the context are its offsets in the message's text.

Imports only ``models`` and ``errors``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from groundjudge.errors import ArgumentError, InputError
from groundjudge.io.ids import id_text
from groundjudge.models import ConversationTurn, SourceInfo

OPTIONS = ("turn", "user_evidence", "system_evidence")
_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}
_SKIPPED_PARTS = {
    "image",
    "image_url",
    "input_image",
    "input_audio",
    "audio",
    "file",
    "input_file",
    "thinking",
    "redacted_thinking",
}
# OpenAI Responses API items that are not messages (no role): a tool call, its output, and items with no text to
# check against (the model's reasoning, its own words; a web search call, whose results it does not hold)
_ITEM_CALLS = {"function_call", "custom_tool_call"}
_ITEM_OUTPUTS = {"function_call_output", "custom_tool_call_output"}
_ITEMS_LEFT_OUT = {"reasoning", "web_search_call"}
_TEXT_PARTS = {"text", "input_text", "output_text", "refusal", "json", "document", "search_result"}
BAD_ID: Any = object()  # each_turn: a row whose id is its error
PART_JOIN = "\n\n"  # between the text parts of one message, or one tool result
# The shortest repeat of the assistant's own words that a tool result loses as evidence (:class:`Echoes`): about a
# sentence. Measured with benchmarks/conversations.py (the assistant states each claim of ../shared/benchmarks before
# a tool returns the row's context, the worst case for a genuine source): at 80 characters 0% of Factcheck-GPT's
# supported rows and 3.5% of WiCE's (sentences also in Wikipedia) lose text, and 0.9% of WiCE's unsupported rows;
# at 60, 1.4% and 8.7%, and 2.1% of WiCE's unsupported rows, one of whose false claims the NLI model then accepted on
# the blanked source (WiCE's first 30: 96.7% caught NLI-only, 100% at 80).
ECHO_MIN_CHARS = 80


@dataclass
class Evidence:
    """One context taken from the conversation, with where it came from."""

    text: str
    info: SourceInfo


@dataclass
class Turn:
    """One message read: its role, its text (answer text for an assistant), and the evidence it holds."""

    role: str
    text: str
    evidence: list[Evidence] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass
class Conversation:
    """What :func:`parse_conversation` gives :func:`~groundjudge.io.rows.parse_sample`."""

    answer: str
    question: str | None
    contexts: list[str]
    sources: list[SourceInfo]
    turns: list[ConversationTurn]


def _pieces(text: str) -> set[int]:
    """The hashes of ``text``'s :data:`ECHO_MIN_CHARS`-long pieces, one from each character."""
    k = ECHO_MIN_CHARS
    return {hash(text[i : i + k]) for i in range(len(text) - k + 1)}


def _strings(value: Any) -> Iterator[str]:
    """Every string in a tool call's arguments (a JSON text is read as its JSON), each also as JSON writes it."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if parsed is not None and not isinstance(parsed, str):
            yield from _strings(parsed)
        yield value
        yield json.dumps(value, ensure_ascii=False)[1:-1]
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


class Echoes:
    """What the assistant has written so far (its turns' text, its tool calls' arguments) and what evidence held, so
    that a tool result's repeats of the assistant's own words are blanked (:meth:`blank`).

    The texts are noted in order and their pieces hashed only when a tool result may hold an echo (the assistant
    wrote :data:`ECHO_MIN_CHARS` characters or more before it): a conversation whose assistant wrote nothing that
    long before a tool's output (a short query, then the answer) costs no hash of its sources, however long (a
    hash of each character of a 5 MB output took 4 s and 700 MB)."""

    def __init__(self) -> None:
        self.authored: set[int] = set()
        self.seen: set[int] = set()
        self._noted: list[tuple[bool, str]] = []  # (written by the assistant, text), in order, not hashed yet

    def wrote(self, value: Any) -> None:
        """The assistant wrote ``value`` (a turn's text, a call's arguments); what evidence held before is not its."""
        self._noted += [(True, text) for text in _strings(value) if len(text) >= ECHO_MIN_CHARS]

    def _hashed(self) -> None:
        """The texts noted so far hashed, in their order: what the assistant wrote less what evidence held before."""
        for written, text in self._noted:
            if written:
                self.authored |= _pieces(text) - self.seen
            else:
                self.seen |= _pieces(text)
        self._noted.clear()

    def blank(self, text: str) -> tuple[str, int]:
        """``text`` with every stretch of :data:`ECHO_MIN_CHARS` or more characters that the assistant wrote and no
        earlier evidence held blanked (a space for each character but line breaks: offsets are kept), and how many
        characters were blanked; what is left counts as evidence held from here on."""
        k, out, blanked = ECHO_MIN_CHARS, text, 0
        if len(text) >= k and (self.authored or any(written for written, _ in self._noted)):
            self._hashed()
        if self.authored and len(text) >= k:
            echoed, held = bytearray(len(text)), bytearray(len(text))
            for i in range(len(text) - k + 1):
                h = hash(text[i : i + k])
                if h in self.authored:
                    echoed[i : i + k] = b"\x01" * k
                if h in self.seen:  # a tool said it before: the assistant quoting it wrote none of it
                    held[i : i + k] = b"\x01" * k
            own = bytes(a & ~b & 1 for a, b in zip(echoed, held, strict=True)) if any(echoed) else b""
            runs = [m.span() for m in re.finditer(b"\x01{%d,}" % k, own)]  # what is left of an echo: at least k
            if runs:
                chars = list(text)
                for a, b in runs:
                    chars[a:b] = [c if c == "\n" else " " for c in chars[a:b]]
                    blanked += b - a
                out = "".join(chars)
        self.held(out)
        return out, blanked

    def held(self, text: str) -> None:
        """``text`` is evidence: the assistant repeating it later is quoting, not writing."""
        if len(text) >= ECHO_MIN_CHARS:
            self._noted.append((False, text))


class _Reader:
    """Reads the messages of one row, remembering tool calls so a result can name its tool."""

    def __init__(self, row: int | None, name: str) -> None:
        self.row, self.name = row, name
        self.calls: dict[str, str | None] = {}  # tool call id -> tool name
        self.pending: list[str | None] = []  # names of calls not yet answered, for results without ids (RAGAS)
        self.echoes = Echoes()

    def error(self, reason: str, where: str) -> InputError:
        return InputError(reason, row=self.row, field=f"{self.name}{where}")

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.error(f"must be a string, not {type(value).__name__}", where)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise self.error(f"is not valid Unicode text: a lone surrogate at character {exc.start}", where) from None
        return value

    def text_of(self, content: Any, where: str) -> str:
        """The text of a ``content``: a string, None, or a list of parts whose text parts are joined."""
        if content is None:
            return ""
        if isinstance(content, str):
            return self.string(content, where)
        if not isinstance(content, list):
            raise self.error(f"must be a string or a list of parts, not {type(content).__name__}", where)
        texts = [self.part_text(part, f"{where}[{j}]") for j, part in enumerate(content)]
        return PART_JOIN.join(t for t in texts if t is not None)

    def part_text(self, part: Any, at: str) -> str | None:
        """The text of one part of a content list; None for a part that holds no text (an image)."""
        if isinstance(part, str):
            return self.string(part, at)
        if not isinstance(part, dict):
            raise self.error(f"must be an object or a string, not {type(part).__name__}", at)
        kind = part.get("type") or "text"
        if not isinstance(kind, str):
            raise self.error(f"has a part whose type is not a string: {kind!r:.40}", f"{at}.type")
        if kind in _SKIPPED_PARTS:
            return None
        if kind in ("text", "input_text", "output_text"):
            return self.string(part.get("text"), f"{at}.text")
        if kind == "refusal":  # what the model said instead of an answer: its text, never left out
            return self.string(part.get("refusal"), f"{at}.refusal")
        if kind == "json":
            return self.as_json(part.get("json"), f"{at}.json")
        if kind in ("document", "search_result"):  # in a tool result (Anthropic): part of what the tool returned
            return self.document_text(kind, part, at)
        raise self.error(f"has a part of type {kind!r} this reader does not know", at)

    def tool_text(self, value: Any, where: str) -> str:
        """A tool's output: text as it is, parts joined whole, anything structured written as JSON (a list is parts
        only if each is a string or a part this reader knows: ``[{"type": "flight", ...}]`` is the tool's own JSON)."""
        parts = isinstance(value, list) and all(
            isinstance(p, str) or (isinstance(p, dict) and p.get("type") in _TEXT_PARTS | _SKIPPED_PARTS) for p in value
        )
        if isinstance(value, str) or value is None or parts:
            return self.text_of(value, where)
        return self.as_json(value, where)  # a JSON array or object of the tool's own

    def as_json(self, value: Any, where: str) -> str:
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise self.error(f"cannot be written as JSON: {exc}", where) from None

    def items(self, message: dict[str, Any], key: str, at: str) -> list[Any]:
        value = message.get(key)
        if value is not None and not isinstance(value, list):
            raise self.error(f"must be a list, not {type(value).__name__}", f"{at}.{key}")
        return value or []

    def note_call(self, call_id: Any, name: Any, where: str, id_key: str = "id") -> None:
        if call_id is not None and not isinstance(call_id, str):
            raise self.error("must be a string", f"{where}.{id_key}")
        if name is not None and not isinstance(name, str):
            raise self.error("must be a string", f"{where}.name")
        if call_id is not None:
            self.calls[call_id] = name
        self.pending.append(name)

    def check_name(self, value: Any, where: str) -> str | None:
        if value is not None and not isinstance(value, str):
            raise self.error(f"must be a string, not {type(value).__name__}", where)
        return value

    def result(
        self, i: int, text: str, call_id: Any, name: str | None, where: str, part: int | None = None
    ) -> Evidence:
        if call_id is not None and not isinstance(call_id, str):
            raise self.error("must be a string", where)
        note = None
        if call_id is not None:
            if call_id in self.calls:
                name = name or self.calls[call_id]
            else:
                note = f"tool_call_id {call_id!r} matches no earlier tool call"
            if name in self.pending:
                self.pending.remove(name)
        elif self.pending:
            name = name or self.pending.pop(0)
        text, note = self.unechoed(text, note)
        info = SourceInfo(message=i, role="tool", tool_call_id=call_id, tool_name=name, part=part, note=note)
        return Evidence(text, info)

    def unechoed(self, text: str, note: str | None) -> tuple[str, str | None]:
        """A tool's output with the assistant's own words blanked (:class:`Echoes`), and its note saying so."""
        text, blanked = self.echoes.blank(text)
        if blanked:
            said = f"{blanked} characters repeating the assistant's own words (a tool call's arguments or an earlier "
            said += "turn) blanked: not evidence"
            note = f"{note}; {said}" if note else said
        return text, note

    def turn(self, i: int, message: Any) -> Turn:
        at = f"[{i}]"
        if not isinstance(message, dict):
            raise self.error(f"must be an object with a role, not {type(message).__name__}", at)
        kind = message.get("type")
        if not message.get("role") and isinstance(kind, str) and kind not in _ROLES:
            return self.item(i, kind, message, at)
        raw_role = message.get("role") or kind
        if not isinstance(raw_role, str) or raw_role not in _ROLES:
            raise self.error(f"is {raw_role!r}; roles are system, user, assistant and tool", f"{at}.role")
        role = _ROLES[raw_role]
        content = message.get("content")
        if content is None and message.get("parts") is not None:  # read as no text, it could hide the final answer
            raise self.error(
                "holds 'parts' (Gemini's format), which this reader does not read: give the text as 'content'",
                f"{at}.parts",
            )
        where = f"{at}.content"
        if role == "tool":
            text = self.tool_text(content, where)
            name = self.check_name(message.get("name"), f"{at}.name")
            ev = self.result(i, text, message.get("tool_call_id"), name, f"{at}.tool_call_id")
            return Turn("tool", text, [ev], ev.info.tool_call_id, ev.info.tool_name)
        if not isinstance(content, list):
            text = self.text_of(content, where)
            turn = Turn(role, text)
        else:
            turn = self.blocks(i, role, content, where)
        if role == "assistant":
            turn.text = turn.text or self.spoken(message, at)
            for j, call in enumerate(self.items(message, "tool_calls", at)):
                if not isinstance(call, dict):
                    raise self.error("must be an object", f"{at}.tool_calls[{j}]")
                fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
                self.note_call(call.get("id"), fn.get("name"), f"{at}.tool_calls[{j}]")
                self.echoes.wrote([fn.get("arguments"), fn.get("args")])  # OpenAI's JSON text, RAGAS's object
            for j, tool in enumerate(self.items(message, "tools_called", at)):  # DeepEval: the call and its output
                if not isinstance(tool, dict):
                    raise self.error("must be an object", f"{at}.tools_called[{j}]")
                self.echoes.wrote(tool.get("input_parameters"))
                text = self.tool_text(tool.get("output"), f"{at}.tools_called[{j}].output")
                name = self.check_name(tool.get("name"), f"{at}.tools_called[{j}].name")
                text, note = self.unechoed(text, None)
                info = SourceInfo(message=i, role="tool", tool_name=name, part=j, note=note)
                turn.evidence.append(Evidence(text, info))
        retrieved = message.get("retrieval_context")  # DeepEval: what this turn retrieved, before its text
        if retrieved is not None:
            if not isinstance(retrieved, list):
                raise self.error("must be a list of strings", f"{at}.retrieval_context")
            for j, doc in enumerate(retrieved):
                text = self.string(doc, f"{at}.retrieval_context[{j}]")
                self.echoes.held(text)  # a document: nothing of it is blanked
                turn.evidence.append(Evidence(text, SourceInfo(message=i, role="document", part=j)))
        if role == "assistant":
            self.echoes.wrote(turn.text)
        return turn

    def item(self, i: int, kind: str, item: dict[str, Any], at: str) -> Turn:
        """An OpenAI Responses API item that is not a message: a tool call (the assistant's), its output (a tool
        result), or an item with no text to check against; any other is an InputError naming its type."""
        if kind in _ITEM_CALLS:
            self.note_call(item.get("call_id"), item.get("name"), at, "call_id")
            self.echoes.wrote([item.get("arguments"), item.get("input")])
            return Turn("assistant", "")
        if kind in _ITEM_OUTPUTS:
            text = self.tool_text(item.get("output"), f"{at}.output")
            ev = self.result(i, text, item.get("call_id"), None, f"{at}.call_id")
            return Turn("tool", text, [ev], ev.info.tool_call_id, ev.info.tool_name)
        if kind in _ITEMS_LEFT_OUT:
            return Turn("assistant", "")
        raise self.error(
            f"is {kind!r}, a message with no role or a Responses API item this reader does not read (it reads "
            "messages and the function_call, function_call_output and reasoning items): give a tool's results as a "
            "tool message or in the row's contexts, the text of a message with its role",
            f"{at}.type",
        )

    def document_text(self, kind: str, block: dict[str, Any], at: str) -> str | None:
        """The text of an Anthropic ``document`` or ``search_result`` block; None for one with no text to check
        against (a PDF or an image)."""
        source = block.get("source")
        data = source.get("data") if isinstance(source, dict) else None
        if kind == "search_result":  # Anthropic search results: text blocks under content
            return self.text_of(block.get("content"), f"{at}.content")
        if isinstance(source, dict) and source.get("type") == "content":
            return self.text_of(source.get("content"), f"{at}.source.content")
        if isinstance(source, dict) and source.get("type") == "text" and isinstance(data, str):
            return self.string(data, f"{at}.source.data")
        return None

    def spoken(self, message: dict[str, Any], at: str) -> str:
        """The text of an assistant message with no text content: its ``refusal`` (OpenAI), else its audio's
        ``transcript``; read as no text, an earlier turn would be judged in place of this one."""
        if message.get("refusal") is not None:
            return self.string(message["refusal"], f"{at}.refusal")
        audio = message.get("audio")
        if audio is None:
            return ""
        if not isinstance(audio, dict) or audio.get("transcript") is None:
            raise self.error(
                "holds audio without its transcript, whose words cannot be checked: give the transcript as the "
                "message's content or as audio.transcript",
                f"{at}.audio",
            )
        return self.string(audio["transcript"], f"{at}.audio.transcript")

    def blocks(self, i: int, role: str, content: list[Any], where: str) -> Turn:
        """A content list: text parts make the message's text; tool results and documents are evidence."""
        texts: list[str] = []
        evidence: list[Evidence] = []
        for j, block in enumerate(content):
            at = f"{where}[{j}]"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind is not None and not isinstance(kind, str):
                raise self.error(f"has a block whose type is not a string: {kind!r:.40}", f"{at}.type")
            if kind in ("tool_result", "document", "search_result") and role in ("assistant", "system"):
                raise self.error(
                    f"is a {kind} block in a{'n' * (role == 'assistant')} {role} message: the {role}'s own words are "
                    "never evidence; a tool's result or a retrieved document goes in a user message (Anthropic) or a "
                    "tool message (OpenAI), or in the row's contexts",
                    at,
                )
            if kind in ("tool_use", "server_tool_use"):
                self.note_call(block.get("id"), block.get("name"), at)
                self.echoes.wrote(block.get("input"))
            elif kind == "tool_result":
                text = self.tool_text(block.get("content"), f"{at}.content")
                evidence.append(self.result(i, text, block.get("tool_use_id"), None, f"{at}.tool_use_id", j))
            elif kind in ("document", "search_result"):
                if (doc := self.document_text(kind, block, at)) is not None:  # None: a PDF or an image
                    self.echoes.held(doc)
                    evidence.append(Evidence(doc, SourceInfo(message=i, role="document", part=j)))
            elif kind == "web_search_tool_result":
                continue  # the server's search results come encrypted: no text to check against
            elif (piece := self.part_text(block, at)) is not None:
                texts.append(piece)
        return Turn(role, PART_JOIN.join(texts), evidence)


def _options(value: Any, row: int | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("must be an object", row=row, field="conversation_options")
    if unknown := sorted(set(value) - set(OPTIONS)):
        raise InputError(
            f"unknown option(s) {unknown}; options are {', '.join(OPTIONS)}", row=row, field="conversation_options"
        )
    for name in ("user_evidence", "system_evidence"):
        if not isinstance(value.get(name, False), bool):
            raise InputError("must be true or false", row=row, field=f"conversation_options.{name}")
    turn = value.get("turn")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
        raise InputError("must be a whole number from 1", row=row, field="conversation_options.turn")
    return value


def read_turns(messages: Any, row: int | None, name: str = "messages", held: Iterable[str] = ()) -> list[Turn]:
    """Every message of ``messages`` read, in order (turn i is message i); a bad one is an InputError naming it.
    ``held``: documents given beside the messages (the row's ``contexts``), evidence before the first message."""
    if not isinstance(messages, list) or not messages:
        raise InputError("must be a non-empty list of messages", row=row, field=name)
    reader = _Reader(row, name)
    for text in held:
        reader.echoes.held(text)
    return [reader.turn(i, m) for i, m in enumerate(messages)]


def parse_conversation(row: dict[str, Any], row_number: int | None) -> Conversation:
    """The answer, question and evidence of a conversation row (``row["messages"]``).

    Raises:
        InputError: a malformed message (naming it, e.g. ``messages[3].content``), no assistant turn with text, or
            no evidence before it.
    """
    options = _options(row.get("conversation_options"), row_number)
    base = row.get("contexts")
    if base is not None and not (isinstance(base, list) and all(isinstance(c, str) for c in base)):
        raise InputError("must be a list of strings", row=row_number, field="contexts")
    turns = read_turns(row.get("messages"), row_number, held=base or ())
    answers = [i for i, t in enumerate(turns) if t.role == "assistant" and t.text.strip()]
    if not answers:
        raise InputError(
            "has no assistant turn with text: there is no answer to check", row=row_number, field="messages"
        )
    k = options.get("turn")
    if k is not None and k > len(answers):
        raise InputError(
            f"asks for assistant turn {k}; the conversation has {len(answers)}",
            row=row_number,
            field="conversation_options.turn",
        )
    at = answers[(k or len(answers)) - 1]
    evidence: list[Evidence] = []
    for i, t in enumerate(turns[: at + 1]):
        evidence.extend(t.evidence)  # the answer turn's own: what DeepEval says it retrieved or called before it
        if (
            i < at
            and t.text.strip()
            and (
                (t.role == "user" and options.get("user_evidence"))
                or (t.role == "system" and options.get("system_evidence"))
            )
        ):
            evidence.append(Evidence(t.text, SourceInfo(message=i, role=t.role)))
    documents = [Evidence(c, SourceInfo(role="document", part=j)) for j, c in enumerate(base or [])]
    evidence = documents + evidence
    if not any(e.text.strip() for e in evidence):
        raise InputError(
            "has no evidence before the answer: no tool result or retrieved document (user turns count only with "
            "conversation_options.user_evidence, the system prompt with system_evidence; a tool result that only "
            "repeats the assistant's own words is none)",
            row=row_number,
            field="messages",
        )
    users = [t.text for t in turns[:at] if t.role == "user" and t.text.strip()]
    cited = {e.info.message for e in evidence}
    shown = [
        ConversationTurn(
            role=t.role,
            text=t.text,
            tool_call_id=t.tool_call_id,
            tool_name=t.tool_name,
            evidence=i in cited,
            answer=i == at,
        )
        for i, t in enumerate(turns)
    ]
    return Conversation(
        answer=turns[at].text,
        question=users[-1] if users else None,
        contexts=[e.text for e in evidence],
        sources=[e.info for e in evidence],
        turns=shown,
    )


def source_text(turns: list[Turn], info: SourceInfo) -> str:
    """The text of the source ``info`` names as evidence, read again from the messages: a context is exactly this
    text (a tool result's echoes of the assistant blanked, at the message's own offsets)."""
    if info.message is None:
        raise ArgumentError("a document given in the row's contexts: its text is the context itself")
    t = turns[info.message]
    held = (e.text for e in t.evidence if e.info.part == info.part and e.info.role == info.role)
    return next(held, t.text)  # a user turn or the system prompt made evidence by an option: its text


def each_turn(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One row per assistant turn of each conversation row, id ``<id>#turn<k>`` (k from 1), each judged against what
    came before it; other rows as they are. A row whose messages cannot be read, or that has no assistant text, is
    passed on as it is (its report then says why)."""
    for n, row in enumerate(rows, 1):
        try:
            rid = id_text(row.get("id")) if isinstance(row, dict) else None
        except InputError:
            rid = BAD_ID
        if not isinstance(row, dict) or row.get("messages") is None or rid is BAD_ID:
            yield row  # not a conversation, or an id that is its error (a turn's id would hide it)
            continue
        try:
            turns = read_turns(row["messages"], n)
        except InputError:
            yield row
            continue
        count = sum(t.role == "assistant" and bool(t.text.strip()) for t in turns)
        if not count:  # no answer to judge: passed on as it is, so that its report says so (never dropped)
            yield row
            continue
        if rid is None or not rid.strip():  # no id, as groundjudge.io.rows.row_id has it: row-N
            rid = f"row-{n}"
        given = row.get("conversation_options")
        options: dict[str, Any] = given if isinstance(given, dict) else {}
        for k in range(1, count + 1):
            yield {**row, "id": f"{rid}#turn{k}", "conversation_options": {**options, "turn": k}}
