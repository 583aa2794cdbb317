"""Any table in: JSONL, CSV, Parquet, a pandas DataFrame or a Hugging Face ``datasets.Dataset``, with column mapping.

Columns are mapped to groundjudge's fields (``id``, ``answer``, ``claim``, ``contexts``, ``question``, ``label``,
``reference``, ``metadata``) by an explicit mapping (``{"answer": "response"}``, on the command line
``--map answer=response,contexts=retrieved_contexts``), else by name: groundjudge's own names first, then the usual
names of RAGAS (``user_input``, ``response``, ``retrieved_contexts``, ``reference``; older ``question``, ``answer``,
``contexts``, ``ground_truth``) and DeepEval (``input``, ``actual_output``, ``retrieval_context``,
``expected_output``, ``context``) datasets. A conversation (``messages``; DeepEval's conversational ``turns``; a
RAGAS multi-turn sample's ``user_input``, which is then a list of messages, not a question) is a list of objects, in
a CSV cell (or a string column) as JSON: :mod:`groundjudge.io.conversations` reads it. A mapped column the table
does not have is a :class:`ConfigError`, before any row, and so is a file with no column for the contexts or the
answer (nor a conversation): one usage error naming the columns found and ``--map``, not one per row; so is a table
that names a column it reads twice (each row would keep one of the two cells). A reference
answer is kept as ``metadata["reference"]`` (what :mod:`groundjudge.diagnose` measures context recall with).

The contexts are a list of strings; a CSV cell (or a string cell of a DataFrame or Parquet file) holds the list as
JSON, or as the Python list pandas' ``to_csv`` writes (``['a', 'b']``). JSON in a cell (contexts, messages,
metadata) is read by the JSONL reader's rule (``io.jsonl.loads``): a repeated key or NaN is that row's InputError
naming the column. A plain string where the list belongs is a
mistyped field, an InputError, except under the singular name ``context`` (a key, a column, or
``--map context=COLUMN``), where a string is one passage.

Rows are numbered from 1 in table order (the header of a CSV is not a row; a JSONL row is its line number). A bad
row is an :class:`InputError` naming that row and the field by the column name the table uses.

CSV is read strictly (:mod:`groundjudge.io.csvfile` says how): a record that cannot be read is an InputError in its
row's place, the rows after it read as usual; a header that is not UTF-8 or not valid CSV is a :class:`ConfigError`.
"""

from __future__ import annotations

import ast
import io
import json
import math
import tokenize
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from groundjudge.errors import ConfigError, InputError
from groundjudge.io import csvfile
from groundjudge.io.jsonl import BOM_CHAR, RefusedJson, loads, read_jsonl, read_lines
from groundjudge.io.rows import parse_sample, unique_rows

FIELDS = (
    "id",
    "answer",
    "claim",
    "contexts",
    "question",
    "label",
    "reference",
    "metadata",
    "messages",
    "conversation_options",
)

# Column names recognised for each field, in order of preference (the first one a row has wins).
ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "sample_id", "row_id"),
    "answer": ("answer", "response", "actual_output"),
    "claim": ("claim",),
    "contexts": ("contexts", "retrieved_contexts", "retrieval_context", "context"),
    "question": ("question", "user_input", "input", "query"),
    "label": ("label",),
    "reference": ("reference", "ground_truth", "ground_truths", "expected_output", "reference_answer"),
    "metadata": ("metadata",),
    # a conversation (groundjudge.io.conversations): OpenAI / Anthropic messages, DeepEval's conversational turns;
    # RAGAS' multi-turn samples give the messages as user_input (a list where the single-turn one has a string)
    "messages": ("messages", "turns"),
    "conversation_options": ("conversation_options",),
}

TABLE_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}


# A mapping may also name ``context``: the column of contexts, where a cell may be one passage (a string).
MAP_FIELDS = (*FIELDS, "context")


def parse_mapping(text: str | None) -> dict[str, str]:
    """``"answer=response,contexts=retrieved_contexts"`` as ``{"answer": "response", ...}``.

    Raises:
        ConfigError: an item is not ``field=column`` or names a field groundjudge does not have.
    """
    mapping: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        target, sep, column = item.partition("=")
        target, column = target.strip(), column.strip()
        if not sep or not target or not column:
            raise ConfigError(f"--map item {item.strip()!r} is not field=column")
        if target not in MAP_FIELDS:
            raise ConfigError(f"--map: unknown field {target!r}; fields are {', '.join(MAP_FIELDS)}")
        mapping[target] = column
    return mapping


def _check_mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    mapping = dict(mapping or {})
    if unknown := set(mapping) - set(MAP_FIELDS):
        fields = ", ".join(MAP_FIELDS)
        raise ConfigError(f"unknown field(s) in the column mapping: {sorted(unknown)}; fields are {fields}")
    if "context" in mapping and "contexts" in mapping:
        raise ConfigError("the column mapping names both contexts and context: map one column to one of them")
    return mapping


def _missing(value: Any) -> bool:
    """None, NaN (pandas' empty cell) or pandas.NA."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def _plain(value: Any) -> Any:
    """A cell as plain Python: numpy arrays and scalars become lists and numbers, missing cells None."""
    if _missing(value):
        return None
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):  # a struct cell (Parquet messages): its fields plain too
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays (Parquet list columns in pandas) and numpy scalars
    if callable(tolist):
        return _plain(tolist())
    return value


def _python_list(text: str) -> list[str] | None:
    """A cell that pandas' ``to_csv`` wrote for a list of strings (Python's repr: ``['a', "b's"]``) as the list;
    None unless it is exactly ``[`` string literals separated by commas ``]``.

    Checked token by token before :func:`ast.literal_eval` (which runs no code), so that numpy's repr of an array
    (``['a' 'b']``, no commas) is not read as Python's implicit concatenation ``['ab']``.
    """
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _LAYOUT_TOKENS]
    except (tokenize.TokenError, SyntaxError):
        return None
    if len(tokens) < 2 or tokens[0].string != "[" or tokens[-1].string != "]":
        return None
    for i, token in enumerate(tokens[1:-1]):
        if (token.type != tokenize.STRING or token.string[0] not in "'\"") if i % 2 == 0 else token.string != ",":
            return None  # a string literal with no prefix (no b'', f'', r''), then a comma, and so on
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, list) and all(isinstance(x, str) for x in value) else None


_LAYOUT_TOKENS = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def _decode_list(value: Any) -> Any:
    """A list of strings (or of context objects ``{"id", "text"}``) encoded in a cell (how a CSV holds contexts:
    JSON, or the Python repr pandas' ``to_csv`` writes) as the list; anything else as it is.

    Raises:
        RefusedJson: JSON that the JSONL reader refuses too (a repeated key: one of its values would be lost).
    """
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            decoded = loads(value)
        except json.JSONDecodeError:
            decoded = _python_list(value.strip())
        if isinstance(decoded, list) and all(isinstance(x, (str, dict)) for x in decoded):  # or {"id", "text"}
            return decoded
    return value


def _decoded_json(value: Any, opener: str, fits: Callable[[Any], bool]) -> Any:
    """A cell holding JSON that starts with ``opener`` as what it decodes to, when that ``fits``; anything else
    (not JSON, or not what the column holds) as it is.

    Raises:
        RefusedJson: JSON that the JSONL reader refuses too (``io.jsonl.loads``: a repeated key, NaN).
    """
    if isinstance(value, str) and value.lstrip().startswith(opener):
        try:
            decoded = loads(value)
        except json.JSONDecodeError:
            return value
        if fits(decoded):
            return decoded
    return value


def _decode_messages(value: Any) -> Any:
    """Messages held as JSON in a cell (a CSV, or a string column of a DataFrame or Parquet file) as the list."""
    return _decoded_json(value, "[", lambda d: isinstance(d, list) and all(isinstance(m, dict) for m in d))


def _decode_object(value: Any) -> Any:
    return _decoded_json(value, "{", lambda d: isinstance(d, dict))


# the cells that may hold JSON text in a table (a CSV; a string column of a DataFrame or Parquet file)
DECODERS: dict[str, Callable[[Any], Any]] = {
    "contexts": _decode_list,
    "reference": _decode_list,
    "metadata": _decode_object,
    "conversation_options": _decode_object,
}


# cells of a table that hold JSON objects: one that opens as an object and is not JSON is refused, and so is a
# messages cell that opens as a list (a contexts cell that is not a list is a string, refused as such: parse_sample)
CELL_JSON = (("metadata", "{"), ("conversation_options", "{"))
NOT_JSON = (
    "holds text that is not JSON ({why}): write the cell as JSON (json.dumps); pandas' to_csv writes a list of "
    "objects, or an object, as Python's repr, which is not read"
)


def _json_fault(value: Any, opener: str) -> str | None:
    """Why a cell that opens as JSON does (``opener``) is not JSON; None for any other value, and for JSON."""
    if not isinstance(value, str) or not value.lstrip().startswith(opener):
        return None
    try:
        loads(value)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at character {exc.pos + 1}"
    except RefusedJson:  # told by the decoders, which raise it
        return None
    return None


class ColumnMap:
    """Maps one table's columns to groundjudge fields; remembers which column each field came from."""

    def __init__(self, mapping: Mapping[str, str] | None = None, *, decode_strings: bool = False) -> None:
        self.mapping = _check_mapping(mapping)
        self.single = self.mapping.get("context")  # a column mapped as context: a cell may be one passage
        if self.single is not None:
            self.mapping["contexts"] = self.mapping.pop("context")
        self.decode_strings = decode_strings

    def check_columns(self, columns: Iterable[str], where: str) -> None:
        """Raise a :class:`ConfigError` when the mapping names a column that is not in ``columns`` (those of
        ``where``, a table or file): a mapping to nothing would silently leave its field out of every row."""
        found = list(dict.fromkeys(columns))
        if missing := [c for c in dict.fromkeys(self.mapping.values()) if c not in found]:
            raise ConfigError(self._missing_message(missing, f"that {where} does not have", found))

    def check_unique(self, columns: Iterable[Any], where: str) -> None:
        """Raise a :class:`ConfigError` when ``where`` (a CSV header, a Parquet file's schema, a DataFrame) names a
        column it reads twice: each row would keep one of the two cells and drop the other without a word; or a
        column it reads behind a byte order mark (``"\\ufeffid"``, what a reader that cuts one mark makes of a file
        saved twice): that column would not be read at all."""
        read = {*self.mapping.values(), *(name for names in ALIASES.values() for name in names)}
        seen: set[str] = set()
        for name in map(str, columns):
            if name in seen and name in read:
                raise ConfigError(f"{where} has two columns named {name!r}: rename one (only one would be read)")
            if name.startswith(BOM_CHAR) and name not in read and name.lstrip(BOM_CHAR) in read:
                raise ConfigError(
                    f"{where} has a column named {name!r}: its name starts with a byte order mark (U+FEFF, left by a "
                    f"tool that saved the file twice), so it would not be read as {name.lstrip(BOM_CHAR)!r}; rename "
                    "it, or read the file with groundjudge, which skips every mark that opens a file"
                )
            seen.add(name)

    def check_fields(self, columns: Iterable[str], where: str) -> None:
        """Raise a :class:`ConfigError` when no column of ``where`` can feed the contexts or the answer: a table
        that lacks one would give every row the same error. A conversation column carries both."""
        found = list(dict.fromkeys(columns))
        if message := self._unfed_message(found, where):
            raise ConfigError(message)

    def _unfed_message(self, found: list[str], where: str) -> str | None:
        def fed(field: str) -> bool:
            return field in self.mapping or any(name in found for name in ALIASES[field])

        if fed("messages") or ("question" not in self.mapping and "user_input" in found):  # maybe a conversation
            return None
        unfed = [
            (what, field, names)
            for what, field, names in (
                ("the contexts", "contexts", ALIASES["contexts"]),
                ("the answer (or claim)", "answer", (*ALIASES["answer"], *ALIASES["claim"])),
            )
            if not any(fed(f) for f in (field, "claim" if field == "answer" else field))
        ]
        if not unfed:
            return None
        what = " or ".join(w for w, _, _ in unfed)
        looked = "; ".join(f"{w}: {', '.join(names)}" for w, _, names in unfed)
        example = ",".join(f"{field}=COLUMN" for _, field, _ in unfed)
        shown = ", ".join(found[:40]) + (f" and {len(found) - 40} more" if len(found) > 40 else "")
        return (
            f"{where} has no column for {what} (names read without --map: {looked}, or a conversation in messages); "
            f"columns found: {shown or 'none'}. Name the columns with --map {example}"
        )

    def check_rows(self, numbered: Iterable[tuple[int, Any]], where: str, *, fields: bool = False) -> None:
        """:meth:`check_columns` for rows that each have their own keys (JSONL, a list of dicts): a mapped column is
        there when any row has it; with ``fields``, :meth:`check_fields` too (a column for the contexts and the
        answer: any row's key). Reads rows until every column is seen (the first row, as a rule), or to the end
        when one is missing; rows that are not objects say nothing (each is its own row's error)."""
        wanted = set(self.mapping.values())
        found: dict[str, None] = {}
        for _, row in numbered:
            if isinstance(row, Mapping):
                found.update(dict.fromkeys(str(k) for k in row))
                if wanted <= found.keys() and not (fields and self._unfed_message(list(found), where)):
                    return
        if missing := [c for c in dict.fromkeys(self.mapping.values()) if c not in found]:
            raise ConfigError(self._missing_message(missing, f"that no row of {where} has", list(found)))
        if fields and found:
            self.check_fields(found, where)

    @staticmethod
    def _missing_message(missing: list[str], where: str, found: list[str]) -> str:
        shown = ", ".join(found[:40]) + (f" and {len(found) - 40} more" if len(found) > 40 else "")
        names = ", ".join(repr(c) for c in missing)
        return f"the column mapping (--map) names column(s) {names} {where}; columns found: {shown or 'none'}"

    def source(self, row: Mapping[str, Any], target: str) -> str | None:
        """The column of ``row`` that feeds ``target``, if any."""
        if target in self.mapping:
            return self.mapping[target]
        return next((name for name in ALIASES[target] if not _missing(row.get(name))), None)

    def normalize(self, row: Any) -> tuple[Any, dict[str, str]]:
        """``row`` in groundjudge's names, and {field: column} for the fields that came from another column.

        A row that is not a mapping is returned as it is (the pipeline says why it is bad).

        Raises:
            InputError: a cell holds JSON the JSONL reader refuses too (a repeated key, NaN), named by its column;
                no row number (:meth:`rows` gives it one).
        """
        if not isinstance(row, Mapping):
            return row, {}
        out: dict[str, Any] = {}
        renamed: dict[str, str] = {}
        for target in FIELDS:
            column = self.source(row, target)
            if column is None or column not in row:
                # an empty cell: a bad row's error still names the column the table has for this field
                empty = self.mapping.get(target) or next((name for name in ALIASES[target] if name in row), None)
                if empty is not None and empty != target:
                    renamed[target] = empty
                continue
            value = _plain(row[column])
            if value is None and target != "id":
                continue
            if column != target:
                renamed[target] = column
            out[target] = value

        def decoded(target: str, decode: Callable[[Any], Any]) -> Any:
            try:
                return decode(out.get(target))
            except RefusedJson as exc:  # the JSONL reader's rule for JSON in a cell too
                raise InputError(f"holds JSON that cannot be read: {exc}", field=renamed.get(target, target)) from None

        if self.decode_strings:
            for target, decode in DECODERS.items():
                if target in out:
                    out[target] = decoded(target, decode)
        if isinstance(out.get("messages"), str):  # JSON in a cell (a CSV, a string column)
            out["messages"] = decoded("messages", _decode_messages)
        if "messages" not in out and self.source(row, "question") == "user_input":
            question = decoded("question", _decode_messages)
            if isinstance(question, list):  # RAGAS multi-turn: user_input is the conversation
                out["messages"] = question
                del out["question"]
                renamed["messages"] = renamed.pop("question")
        for target, opener in (("messages", "["), *(CELL_JSON if self.decode_strings else ())):
            if (why := _json_fault(out.get(target), opener)) is not None:
                raise InputError(NOT_JSON.format(why=why), field=renamed.get(target, target))
        if isinstance(out.get("contexts"), str) and self.source(row, "contexts") in ("context", self.single):
            out["contexts"] = [out["contexts"]]  # the singular name, or a column mapped as context: one passage
        reference = out.pop("reference", None)
        if reference is not None:
            if isinstance(reference, list) and all(isinstance(x, str) for x in reference):
                reference = " ".join(reference)  # RAGAS' old ground_truths: a list of reference answers
            metadata = out.get("metadata")
            if metadata is None:
                out["metadata"] = {"reference": reference}
            elif isinstance(metadata, dict):
                out["metadata"] = {**metadata, "reference": reference}
        return out, renamed

    def rows(self, numbered: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
        """(row number, row in groundjudge's names or an :class:`InputError` naming the table's column)."""
        for n, raw in numbered:
            if isinstance(raw, InputError):
                yield n, raw
                continue
            try:
                row, renamed = self.normalize(raw)
            except InputError as exc:  # a cell that cannot be read, named by its column
                id_column = self.source(raw, "id")
                rid = _plain(raw[id_column]) if id_column in raw else None
                yield n, InvalidRow(rid, InputError(exc.reason, row=n, field=exc.field))
                continue
            if renamed:  # validate here, so that an error names the column the table has, not groundjudge's field
                try:
                    parse_sample(row, n)
                except InputError as exc:
                    error = InputError(exc.reason, row=exc.row, field=_column_of(exc.field, renamed))
                    yield n, InvalidRow(row.get("id"), error)
                    continue
            yield n, row


class InvalidRow(dict):
    """A row already known to be bad: it keeps its id (so its ERROR report, duplicates and --resume see the row's
    own id) and raises its :class:`InputError`, which names the table's column, when anything else is read."""

    def __init__(self, rid: Any, error: InputError) -> None:
        super().__init__({} if rid is None else {"id": rid})
        self.error = error

    def get(self, key: Any, default: Any = None) -> Any:
        if key == "id":
            return super().get(key, default)
        raise self.error


def _column_of(field: str | None, renamed: dict[str, str]) -> str | None:
    """``contexts[2]`` as ``retrieved_contexts[2]`` when contexts came from that column."""
    if field is None:
        return None
    base, bracket, rest = field.partition("[")
    column = renamed.get(base)
    return field if column is None else column + bracket + rest


# -- readers ----------------------------------------------------------------------------------------------------


def is_local(uri: str | Path) -> bool:
    """Whether ``uri`` is a path on this machine (no scheme, or ``file://``) rather than a URI pyarrow reads."""
    text = str(uri)
    return "://" not in text or text.startswith("file://")


def local_path(uri: str | Path) -> Path:
    """The path of a local input: as given, or a ``file://`` URI's path with its percent-escapes read
    (``file:///data/a%20b.jsonl``, what ``Path.as_uri()`` and other tools write, is ``/data/a b.jsonl``)."""
    text = str(uri)
    return Path(unquote(text[len("file://") :])) if text.startswith("file://") else Path(text)


def check_input_exists(source: str | Path) -> None:
    """Refuse a local input that is not there, naming it (a remote one is found missing when it is read).

    Raises:
        ConfigError: ``no input file SOURCE``.
    """
    if is_local(source) and not local_path(source).exists():
        raise ConfigError(f"no input file {source}")


def _uri_path(uri: str | Path) -> str:
    """The path part of ``uri``, for its suffix (``s3://bucket/a.parquet?x`` -> ``/a.parquet``)."""
    text = str(uri)
    if not is_local(text):
        text = text.split("://", 1)[1].split("?", 1)[0]
        text = "/" + text.split("/", 1)[1] if "/" in text else "/"
    return text


def table_format(path: str | Path) -> str:
    """``jsonl``, ``csv`` or ``parquet``, from the file name; a local directory is a Parquet dataset.

    Raises:
        ConfigError: the name does not tell (``.txt``, no suffix; ``.jsonl.gz`` is not supported).
    """
    if is_local(path) and local_path(path).is_dir():
        return "parquet"
    name = _uri_path(path).rstrip("/")
    suffix = Path(name).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ConfigError(
            f"{path}: cannot tell the format from {suffix or 'no suffix'!r}; use .jsonl, .csv or .parquet"
        )
    return TABLE_SUFFIXES[suffix]


def _need(module: str, extra: str, what: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise ConfigError(f"{what} needs {module.split('.')[0]}: pip install 'groundjudge[{extra}]'") from None


class RemoteFile:
    """A file at a URI pyarrow reads (``s3://``, ``gs://``, ``hdfs://``), opened for reading like a Path."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def open(self, mode: str = "rb") -> Any:
        fs_mod = _need("pyarrow.fs", "parquet", f"reading {self.uri}")
        fs, path = fs_mod.FileSystem.from_uri(self.uri)
        return io.BufferedReader(fs.open_input_stream(path))

    def __str__(self) -> str:
        return self.uri


def _source(uri: str | Path) -> Path | RemoteFile:
    return local_path(uri) if is_local(uri) else RemoteFile(str(uri))


def open_csv(path: str | Path) -> tuple[list[str], Iterator[tuple[int, Any]]]:
    """(the header's column names, read now; (row number, row or InputError) for each data row, streamed)."""
    return csvfile.open_csv(_source(path), str(path))


def read_csv(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(row number, row) for each data row of a CSV file with a header; an empty cell is None (no value); a row
    that cannot be read is an :class:`InputError` naming it (see :mod:`groundjudge.io.csvfile`)."""
    return open_csv(path)[1]


def parquet_files(uri: str | Path) -> tuple[Any, list[str]]:
    """(pyarrow filesystem, the Parquet files of ``uri`` in name order): one file, or every ``*.parquet`` below a
    directory, local or remote."""
    fs_mod = _need("pyarrow.fs", "parquet", "reading Parquet")
    if is_local(uri):
        p = local_path(uri)
        return fs_mod.LocalFileSystem(), sorted(str(f) for f in p.rglob("*.parquet")) if p.is_dir() else [str(p)]
    fs, path = fs_mod.FileSystem.from_uri(str(uri))
    if fs.get_file_info(path).type == fs_mod.FileType.Directory:
        selector = fs_mod.FileSelector(path, recursive=True)
        return fs, sorted(i.path for i in fs.get_file_info(selector) if i.path.endswith(".parquet"))
    return fs, [path]


def _repeated_field(kind: Any, path: str) -> str | None:
    """Where a Parquet column's nested objects (struct fields, in lists and maps too) name a field twice: a struct
    holds both, a row read as Python keeps one (pyarrow refuses to read it). ``'path.name' names 'name'``, or None."""
    if hasattr(kind, "num_fields") and kind.num_fields and type(kind).__name__ == "StructType":
        seen: set[str] = set()
        for i in range(kind.num_fields):
            field = kind.field(i)
            if field.name in seen:
                return f"{path!r} names {field.name!r}"
            seen.add(field.name)
            if (inner := _repeated_field(field.type, f"{path}.{field.name}")) is not None:
                return inner
        return None
    for attr in ("value_type", "key_type", "item_type"):  # lists (value), maps (key, item)
        inner_kind = getattr(kind, attr, None)
        if inner_kind is not None and (inner := _repeated_field(inner_kind, f"{path}[]")) is not None:
            return inner
    return None


def _bad_parquet(f: str, exc: BaseException) -> ConfigError:
    why = "it is empty (0 bytes)" if "size is 0 bytes" in str(exc) else f"{type(exc).__name__}: {exc}"
    return ConfigError(f"{f}: cannot read it as Parquet: {why}")


def open_parquet(
    path: str | Path, batch_rows: int = 1024, check: Callable[[list[str], str], None] | None = None
) -> tuple[list[str], Iterator[tuple[int, Any]]]:
    """(the columns of the Parquet file or files of ``path``, from their footers, read now; (row number, row) for
    each row, streamed a batch at a time). ``check(columns, file)`` is called on each file's own columns (the
    union would hide a name repeated in one file: :meth:`ColumnMap.check_unique`).

    Raises:
        ConfigError: a file is not Parquet (empty, damaged, another format), now or when it is read; the message
            names the file.
    """
    pq = _need("pyarrow.parquet", "parquet", "reading Parquet")
    fs, files = parquet_files(path)
    columns: list[str] = []
    for f in files:  # every footer now: a file that is not Parquet stops the run before any row is scored
        try:
            with fs.open_input_file(f) as fh:
                schema = pq.ParquetFile(fh).schema_arrow
                names = schema.names
        except (OSError, ValueError, TypeError) as exc:  # pyarrow's ArrowInvalid is a ValueError, ArrowIOError OSError
            raise _bad_parquet(f, exc) from None
        if check is not None:
            check(names, f)
        for column in schema:
            if (where := _repeated_field(column.type, column.name)) is not None:
                raise ConfigError(
                    f"{f}: {where} twice, in the objects of column {column.name!r}: one of its values would be lost; "
                    "rename one of the two fields"
                )
        columns += [c for c in names if c not in columns]

    def rows() -> Iterator[tuple[int, Any]]:
        n = 0
        for f in files:
            try:
                with fs.open_input_file(f) as fh:
                    for batch in pq.ParquetFile(fh).iter_batches(batch_size=batch_rows):
                        for row in batch.to_pylist():
                            n += 1
                            yield n, row
            except (OSError, ValueError, TypeError) as exc:
                raise _bad_parquet(f, exc) from None

    return columns, rows()


def read_parquet(path: str | Path, batch_rows: int = 1024) -> Iterator[tuple[int, Any]]:
    """(row number, row) for each row of a Parquet file or directory of them, streamed a batch at a time (needs
    pyarrow); an empty cell is None, which the column mapping reads as no value. A file that is not Parquet is a
    :class:`ConfigError` naming it."""
    return open_parquet(path, batch_rows)[1]


def is_table(obj: Any) -> bool:
    """Whether ``obj`` is a pandas DataFrame or a ``datasets.Dataset`` (checked without importing either)."""
    cls = type(obj)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if name.startswith("pandas.") and cls.__name__ == "DataFrame":
        return True
    return cls.__module__.startswith("datasets.") and cls.__name__ in ("Dataset", "IterableDataset")


def with_named_index(frame: Any) -> Any:
    """A pandas DataFrame with each named level of its index as a column (``df.set_index("id")``: the ids are in
    the index), as ``to_csv`` and ``to_parquet`` write them, so that a frame and the file written from it give
    the same rows and ids; a level whose name is already a column (``set_index("id", drop=False)``) stays in the
    index. An unnamed index (pandas' row positions) is no column, nor are levels that share a name (read_rows
    refuses them where the name is one it reads: :meth:`ColumnMap.check_unique`)."""
    columns = {str(c) for c in frame.columns}
    names = Counter(str(name) for name in frame.index.names if name is not None)
    named = [name for name in frame.index.names if name is not None and names[str(name)] == 1]
    named = [name for name in named if str(name) not in columns]
    return frame.reset_index(level=named) if named else frame


def table_rows(table: Any) -> Iterator[tuple[int, Any]]:
    """(row number from 1, row dict) of a pandas DataFrame or a ``datasets.Dataset``."""
    if type(table).__name__ == "DataFrame":
        columns = [str(c) for c in table.columns]
        for n, values in enumerate(table.itertuples(index=False, name=None), start=1):
            yield n, dict(zip(columns, values, strict=True))
    else:
        for n, row in enumerate(table, start=1):
            yield n, dict(row)


def read_rows(
    source: str | Path | Any, mapping: Mapping[str, str] | None = None, *, fmt: str | None = None
) -> Iterator[tuple[int, Any]]:
    """(row number, row in groundjudge's names or an InputError) from a file (JSONL, CSV, Parquet, a directory of
    Parquet files; a local path or a URI pyarrow reads), a pandas DataFrame, a ``datasets.Dataset``, or an iterable
    of dicts. The one reader of rows: every command and both engines read through it.

    Raises:
        ConfigError: a local file that is not there (:func:`check_input_exists`), an unknown format, a reader
            whose package is missing (the message names the extra), a CSV header or a Parquet file that cannot be
            read, a mapping to a column the table does not have (the CSV header, the Parquet schema, a DataFrame's
            or Dataset's columns; JSONL and a list of dicts: no row has it), a file with no column for the contexts
            or the answer (and no conversation): all checked now, before any row is given.
    """
    if isinstance(source, (str, Path)):
        check_input_exists(source)
        kind = fmt or table_format(source)
        cmap = ColumnMap(mapping, decode_strings=kind != "jsonl")
        if kind == "csv":
            header, numbered = open_csv(source)
            cmap.check_unique(header, f"{source}: the header")
            cmap.check_columns(header, str(source))
            cmap.check_fields(header, str(source))
        elif kind == "parquet":
            schema, numbered = open_parquet(source, check=cmap.check_unique)  # each file's columns: a later one too
            cmap.check_columns(schema, str(source))
            cmap.check_fields(schema, str(source))
        else:
            cmap.check_rows(read_jsonl(_source(source)), str(source), fields=True)
            numbered = read_jsonl(_source(source))
        return cmap.rows(numbered)
    if is_table(source):
        cmap = ColumnMap(mapping, decode_strings=True)
        if type(source).__name__ == "DataFrame":
            if getattr(source.columns, "nlevels", 1) > 1:  # its names are tuples: no column would be read
                raise ConfigError(
                    f"the DataFrame's columns have {source.columns.nlevels} levels (a MultiIndex, as a pivot or a "
                    "groupby makes): give it one level, e.g. frame.columns = ['_'.join(map(str, c)) for c in "
                    "frame.columns], then map the names (columns=...)"
                )
            cmap.check_unique((n for n in source.index.names if n is not None), "the DataFrame's index")
            source = with_named_index(source)
        names = source.columns if type(source).__name__ == "DataFrame" else source.column_names
        if names is not None:
            cmap.check_unique(names, f"the {type(source).__name__}")
        if cmap.mapping and names is not None:  # an IterableDataset may not know its columns
            cmap.check_columns((str(c) for c in names), f"the {type(source).__name__}")
        return cmap.rows(table_rows(source))
    refuse_one_row(source)
    cmap = ColumnMap(mapping)
    if cmap.mapping and isinstance(source, (list, tuple)):
        cmap.check_rows(enumerate(source, start=1), "the rows")
    return cmap.rows(enumerate(source, start=1))


def refuse_one_row(source: Any) -> None:
    """Refuse one row given where rows go: a dict iterates as its keys, each of which was one ERROR row ("a row
    must be a JSON object, not str").

    Raises:
        ConfigError: ``one row (a dict) given where rows go: pass a list of rows``.
    """
    if isinstance(source, Mapping):
        raise ConfigError(
            "one row (a dict) given where rows go: pass a list of rows ([row]), or score one answer with evaluate()"
        )


def as_rows(rows: Any, mapping: Mapping[str, str] | None = None) -> Iterable[Any]:
    """Rows for :meth:`Evaluator.evaluate_many`: a DataFrame or Dataset as mapped dicts (bad rows as
    InputErrors), anything else unchanged (one dict is refused: :func:`refuse_one_row`)."""
    refuse_one_row(rows)
    if is_table(rows) or mapping:
        return (row for _, row in read_rows(rows, mapping))
    return rows


def input_rows(
    source: str | Path, skip: set[str], mapping: Mapping[str, str] | None = None
) -> Iterator[tuple[int, Any]]:
    """The rows a dataset run scores: :func:`read_rows` of ``source`` under the id rule
    (:func:`~groundjudge.io.rows.unique_rows`: a repeated id is an InputError), without the ids in ``skip``."""
    return unique_rows(read_rows(source, mapping), skip)


def count_rows(path: str | Path, fmt: str, at_most: int | None = None) -> int | None:
    """Rows in an input file, cheaply (no parsing): non-blank lines as the readers split them (``io.jsonl.read_lines``:
    the byte order marks that open the file are no row), CSV records, or Parquet metadata; None when
    that cannot be told cheaply (every row of a remote file, a bad Parquet file: the reader says what is wrong when
    it reads). ``at_most``: stop counting there (whether a file has rows: ``at_most=1`` reads up to its first row,
    or the footers up to the first Parquet file with rows, local or remote). A file that is not there raises
    FileNotFoundError, whatever its format."""
    if not is_local(path) and at_most is None:
        return None  # counting them all would read a remote file (or every footer of a remote dataset) once more
    if fmt == "parquet":
        try:
            pq = _need("pyarrow.parquet", "parquet", "reading Parquet")
            fs, files = parquet_files(path)
            total = 0
            for f in files:
                total += int(pq.ParquetFile(fs.open_input_file(f)).metadata.num_rows)
                if at_most is not None and total >= at_most:
                    break
            return total
        except FileNotFoundError:  # no such file: the caller says so (pending_rows: "no input file")
            raise
        except Exception:
            return None
    # the readers' own lines: byte order marks cut, lines that end in a lone \r split (a CSV or JSONL file saved
    # by an old Mac tool was one line, and a CSV of rows counted as a header alone)
    header = 1 if fmt == "csv" else 0
    lines = 0
    for _, line in read_lines(_source(path)):
        lines += 1 if line.strip() else 0
        if at_most is not None and lines >= at_most + header:
            break
    return max(0, lines - header)
