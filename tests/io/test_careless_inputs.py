"""Careless and hostile input through the one row reader (``io.tables.read_rows``): byte order marks, JSON in cells,
columns repeated in a later file, ids through pandas. Each case reads correctly or is an error naming row and
field (or the file and column, before any row)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from groundjudge.errors import ConfigError, InputError
from groundjudge.io.conversations import each_turn
from groundjudge.io.rows import parse_sample
from groundjudge.io.tables import read_rows

P = "The library opens at 9 am."
BOM = b"\xef\xbb\xbf"


def read(source: Any, mapping: dict[str, str] | None = None) -> list[tuple[int, Any]]:
    return list(read_rows(source, mapping))


# -- byte order marks -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("marks", [1, 2, 3])
def test_a_file_saved_twice_with_a_byte_order_mark_keeps_its_first_column(tmp_path: Path, marks: int) -> None:
    """A tool that adds a byte order mark each time it saves left two: the reader cut one and the header's first
    column became '\\ufeffid', so every row lost its id (its report became row-N, matching no earlier run) or, with
    the answer first, the file had "no column for the answer". Every mark that opens the file is cut."""
    csv_path = tmp_path / "in.csv"
    csv_path.write_bytes(BOM * marks + f'id,answer,contexts\nr1,It opens at 9 am.,"[""{P}""]"\n'.encode())
    assert read(csv_path) == [(1, {"id": "r1", "answer": "It opens at 9 am.", "contexts": [P]})]
    first_answer = tmp_path / "answer_first.csv"
    first_answer.write_bytes(BOM * marks + f'"answer",contexts\nIt opens.,"[""{P}""]"\n'.encode())
    assert read(first_answer) == [(1, {"answer": "It opens.", "contexts": [P]})]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_bytes(BOM * marks + json.dumps({"id": "r1", "answer": "a", "contexts": [P]}).encode() + b"\n")
    assert read(jsonl) == [(1, {"id": "r1", "answer": "a", "contexts": [P]})]


def test_a_column_behind_a_byte_order_mark_in_a_dataframe_or_parquet_is_a_usage_error(tmp_path: Path) -> None:
    """pandas cuts one mark: a file saved twice gives a DataFrame (or a Parquet file written from it) whose first
    column is '\\ufeffid', which no row would be read from. Refused before any row, naming the column."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"\ufeffid": ["r1"], "answer": ["a"], "contexts": [[P]]})
    parquet = tmp_path / "in.parquet"
    pytest.importorskip("pyarrow")
    frame.to_parquet(parquet)
    for source in (frame, parquet):
        with pytest.raises(ConfigError, match=r"column named '\\ufeffid': its name starts with a byte order mark"):
            read(source)
    # a column mapped by its own name, mark and all, is read
    assert read(frame, {"id": "\ufeffid"})[0][1]["id"] == "r1"


# -- JSON in a cell ---------------------------------------------------------------------------------------------


def test_json_in_a_cell_that_repeats_a_key_is_its_rows_error_naming_the_column(tmp_path: Path) -> None:
    """A JSON line that repeats a key is refused, but JSON in a CSV or Parquet cell was read by Python's json, which
    keeps the last value: a message's first "content" or a context's first "text" was dropped without a word and
    the row scored on what was left. The cell is read by the JSONL reader's rule (io.jsonl.loads); the rows around
    it are read, and the bad row keeps its id."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    good = json.dumps([{"role": "tool", "content": P}, {"role": "assistant", "content": "At 9."}])
    twice = '[{"role": "tool", "content": "' + P + '", "content": "x"}, {"role": "assistant", "content": "At 9."}]'
    frame = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "messages": [twice, good, None, None],
            "answer": [None, None, "At 9.", "At 9."],
            "retrieved_contexts": [None, None, '[{"id": "1", "text": "x", "text": "' + P + '"}]', json.dumps([P])],
            "metadata": [None, None, None, '{"k": 1, "k": 2}'],
        }
    )
    frame.to_csv(tmp_path / "in.csv", index=False)
    frame.to_parquet(tmp_path / "in.parquet")
    for source in (tmp_path / "in.csv", tmp_path / "in.parquet", frame):
        rows = read(source)
        assert [n for n, _ in rows] == [1, 2, 3, 4]
        assert rows[1][1]["messages"][1]["content"] == "At 9."  # the good row is read
        for (n, row), (column, key) in zip(
            [rows[0], rows[2], rows[3]],
            [("messages", "content"), ("retrieved_contexts", "text"), ("metadata", "k")],
            strict=True,
        ):
            assert row.get("id") == "abcd"[n - 1], source
            with pytest.raises(InputError) as err:
                row.get("answer")
            assert (err.value.row, err.value.field) == (n, column)
            assert f"holds JSON that cannot be read: the key {key!r} appears twice in one object" in str(err.value)


def test_nan_in_json_in_a_cell_is_its_rows_error_not_a_string(tmp_path: Path) -> None:
    """Python's json reads NaN; the list [\"a\", NaN] was then not a list of strings, so the cell stayed a string and
    the row was told that its contexts 'is a string': the wrong reason. The JSONL rule names NaN."""
    path = tmp_path / "in.csv"
    path.write_text('answer,contexts\nAt 9.,"[""x"", NaN]"\n', encoding="utf-8")
    ((_, row),) = read(path)
    with pytest.raises(InputError, match="row 1, field 'contexts': holds JSON that cannot be read: NaN is not a JSON"):
        row.get("answer")


# -- a column repeated in a later file ----------------------------------------------------------------------------


def test_a_column_repeated_only_in_a_later_parquet_file_is_a_usage_error(tmp_path: Path) -> None:
    """The columns of a directory of Parquet files were the union of the files' columns, each name once, so a file
    after the first that names 'answer' twice passed the check and its rows were scored on one of the two cells.
    Each file's own columns are checked, and the message names that file."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "rows"
    folder.mkdir()
    pq.write_table(pa.table({"id": ["r1"], "answer": ["At 9."], "contexts": [[P]]}), folder / "a.parquet")
    arrays = [pa.array(["r2"]), pa.array(["At 9."]), pa.array([[P]]), pa.array(["The moon is cheese."])]
    later = folder / "b.parquet"
    pq.write_table(pa.Table.from_arrays(arrays, names=["id", "answer", "contexts", "answer"]), later)
    with pytest.raises(ConfigError, match=f"^{later} has two columns named 'answer': rename one"):
        read(folder)


# -- ids ----------------------------------------------------------------------------------------------------------


def ids(source: Any) -> list[str]:
    """Each row's report id, or 'error: <field>: <reason>' for a row refused."""
    out = []
    for n, row in read(source):
        try:
            out.append(parse_sample(row, n).id)
        except InputError as exc:
            out.append(f"error: {exc.field}: {exc.reason}")
    return out


def test_one_id_rule_for_jsonl_csv_parquet_and_dataframes(tmp_path: Path) -> None:
    """Through pandas an integer id column with a gap becomes floats: id 1 was reported as '1.0' and matched none of
    an earlier run's reports, labels or reviews (where it was '1'). Now an integral float is its integer's digits in
    every format; a float with a fraction, one too large to hold its integer exactly, and true/false are that row's
    error naming the id; no id (null, an empty cell, pandas' NaN) is row-N in every format, as the same table
    written to CSV (an empty cell) or Parquet (a null) reads."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    base = {"answer": "At 9.", "contexts": [P]}
    jsonl = tmp_path / "in.jsonl"
    given = [1, 2.0, "3", None, 4.5, True, 2.0**60]
    jsonl.write_text("".join(json.dumps({"id": i, **base}) + "\n" for i in given), encoding="utf-8")
    got = ids(jsonl)
    assert got[:4] == ["1", "2", "3", "row-4"]
    assert got[4] == "error: id: is 4.5, a number that is not an integer: give ids as strings or integers"
    assert got[5] == "error: id: must be a string or a number, not true/false"
    assert got[6].startswith("error: id: is 1.152921504606847e+18, a float too large to hold an integer exactly")
    frame = pd.DataFrame({"id": [1, None, 3], "answer": ["At 9."] * 3, "contexts": [[P]] * 3})
    assert frame["id"].dtype == "float64"  # what pandas makes of it
    for column in ("id", "sample_id"):
        assert ids(frame.rename(columns={"id": column})) == ["1", "row-2", "3"]
    bad = pd.DataFrame({"id": [1.5, 2.0], "answer": ["At 9."] * 2, "contexts": [[P]] * 2})
    for column in ("id", "sample_id"):  # a bad row's error names the table's column
        got = ids(bad.rename(columns={"id": column}))
        assert got[0].startswith(f"error: {column}: is 1.5, a number that is not an integer") and got[1] == "2", got
    frame.to_csv(tmp_path / "in.csv", index=False)  # written as 1.0, (empty), 3.0: text, kept as written
    assert ids(tmp_path / "in.csv") == ["1.0", "row-2", "3.0"]
    frame.astype({"id": "Int64"}).to_parquet(tmp_path / "in.parquet")  # a real gap: null
    assert ids(tmp_path / "in.parquet") == ids(frame.astype({"id": "Int64"})) == ["1", "row-2", "3"]
    # a context's id follows the same rule: citation [1] names the context whose id pandas made 1.0
    row = {"answer": "At 9 [1].", "contexts": [{"id": 1.0, "text": P}, {"id": 2.5, "text": P}]}
    with pytest.raises(InputError, match=r"field 'contexts\[1\].id': is 2.5, a number that is not an integer"):
        parse_sample(row, 1)
    assert parse_sample({**row, "contexts": row["contexts"][:1]}, 1).context_ids == ["1"]
    # and a conversation's turns take their row's id by it: 1.0#turn1 would match nothing
    messages = [{"role": "tool", "content": P}, {"role": "assistant", "content": "At 9."}]
    assert [r["id"] for r in each_turn([{"id": 1.0, "messages": messages}])] == ["1#turn1"]
    no_id = [r["id"] for r in each_turn([{"id": None, "messages": messages}])]
    assert [r["id"] for r in each_turn([{"id": math.nan, "messages": messages}])] == no_id  # NaN: no id


def test_ids_in_a_dataframes_index_are_its_ids_as_in_the_files_written_from_it(tmp_path: Path) -> None:
    """``frame.set_index("id")`` (how a notebook keeps its ids) was read without its index: every answer came back
    as row-N, while the same frame written by ``to_csv`` or ``to_parquet`` (which write a named index as a column)
    kept its ids; the run's frame (indexed by id) then joined nothing of the user's. A named index level is now a
    column, as those files hold it; an unnamed one (row positions) is not; one also kept as a column stays one."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"id": ["a", "b"], "answer": ["At 9."] * 2, "contexts": [[P]] * 2})
    indexed = frame.set_index("id")
    indexed.to_csv(tmp_path / "in.csv")
    indexed.to_parquet(tmp_path / "in.parquet")
    assert ids(indexed) == ids(tmp_path / "in.csv") == ids(tmp_path / "in.parquet") == ["a", "b"]
    assert ids(frame.set_index("id", drop=False)) == ["a", "b"]
    mapped = read(frame.rename(columns={"id": "key"}).set_index("key"), {"id": "key"})  # a mapped index too
    assert [parse_sample(row, n).id for n, row in mapped] == ["a", "b"]
    assert ids(frame.drop(columns="id").set_index(pd.Index([7, 9]))) == ["row-1", "row-2"]  # positions: no id


def test_a_dataframe_index_of_two_levels_of_one_name_is_a_usage_error_or_no_column() -> None:
    """An index of two levels named ``id`` raised pandas' bare ValueError ("The name id occurs multiple times") out
    of the reader. Two levels of a name the reader reads are refused as two such columns are; two of another name
    stay in the index (not read, as before); other names, a number among them, are columns as one level is."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"answer": ["At 9."] * 2, "contexts": [[P]] * 2})
    twice = frame.set_index(pd.MultiIndex.from_tuples([("a", "x"), ("b", "y")], names=["id", "id"]))
    with pytest.raises(ConfigError, match="the DataFrame's index has two columns named 'id'"):
        read(twice)
    other = frame.set_index(pd.MultiIndex.from_tuples([("a", "x", 1), ("b", "y", 2)], names=["k", "k", "id"]))
    assert ids(other) == ["1", "2"]
    numbered = frame.set_index(pd.MultiIndex.from_tuples([("a", 1), ("b", 2)], names=[0, "id"]))
    assert ids(numbered) == ["1", "2"]


# -- careless cells -----------------------------------------------------------------------------------------------


def test_a_messages_or_metadata_cell_that_is_not_json_says_so(tmp_path: Path) -> None:
    """pandas' to_csv writes a list of messages, or a metadata dict, as Python's repr ({'role': ...}), and a cut
    cell ends mid-JSON: the row was told its messages 'must be a non-empty list of messages' or its metadata 'must be
    an object', which they looked like. The error now says the cell is not JSON, where, and how to write it."""
    pd = pytest.importorskip("pandas")
    messages = [{"role": "tool", "content": P}, {"role": "assistant", "content": "At 9."}]
    frame = pd.DataFrame({"id": ["a", "b"], "messages": [messages, None], "answer": [None, "At 9."]})
    frame["contexts"] = [None, json.dumps([P])]
    frame["metadata"] = [None, {"k": 1}]
    path = tmp_path / "in.csv"
    frame.to_csv(path, index=False)  # Python's repr in both cells
    cut = tmp_path / "cut.csv"
    cut.write_text('id,messages\nc,"[{""role"": ""tool"", ""content"": ""x""}"\n', encoding="utf-8")
    rows = read(path) + read(cut)
    for (n, row), column in zip(rows, ["messages", "metadata", "messages"], strict=True):
        with pytest.raises(InputError) as err:
            parse_sample(row, n)
        assert (err.value.row, err.value.field) == (n, column)
        assert err.value.reason.startswith("holds text that is not JSON (")
        assert "write the cell as JSON (json.dumps)" in err.value.reason
    # a question that opens with a bracket is still a question, and JSON cells are read as before
    ok = [{"user_input": "[Urgent] when?", "response": "At 9.", "retrieved_contexts": json.dumps([P])}]
    assert parse_sample(read(pd.DataFrame(ok))[0][1], 1).question == "[Urgent] when?"


def test_a_contexts_item_that_is_not_a_string_is_named() -> None:
    """A Parquet list with a null in it, or a number among the passages, was 'must be a list of strings' with no
    word of which item; the error names it."""
    with pytest.raises(InputError, match=r"must be a list of strings: contexts\[1\] is null, not a string"):
        parse_sample({"answer": "At 9.", "contexts": [P, None]}, 1)
    with pytest.raises(InputError, match=r"must be a list of strings, not dict"):
        parse_sample({"answer": "At 9.", "contexts": {"a": P}}, 1)


@pytest.mark.parametrize("end", [b"\r", b"\r\n", b"\n"])
def test_json_lines_that_end_in_a_lone_carriage_return_are_rows(tmp_path: Path, end: bytes) -> None:
    """A JSONL file whose lines end in a lone \\r (old Mac files, some exports) was read as one line: one 'invalid
    JSON: Extra data' row, and every row after the first lost. Lines end as the first line ends, as in CSV."""
    rows = [{"id": f"r{i}", "answer": "At 9.", "contexts": [P + end.decode()]} for i in range(3)]
    path = tmp_path / "in.jsonl"
    path.write_bytes(BOM + end.join(json.dumps(r).encode() for r in rows) + end + end)  # a blank line at the end
    assert read(path) == [(i + 1, r) for i, r in enumerate(rows)]


def test_spaces_around_csv_header_names_and_ids_are_not_part_of_them(tmp_path: Path) -> None:
    """A header written "id, answer, contexts" had columns ' answer' and ' contexts': the file had "no column for
    the answer", and --map could not name them (it strips what it is given). An id ' r1' was reported as ' r1',
    matching no other run's 'r1'; a context's id was stripped already. Names and ids lose the spaces around them;
    cells keep theirs."""
    path = tmp_path / "in.csv"
    path.write_text(f'id , answer,\tcontexts\n r1 , At 9.,"[""{P}""]"\n', encoding="utf-8")
    ((n, row),) = read(path)
    assert row == {"id": " r1 ", "answer": " At 9.", "contexts": [P]}
    assert parse_sample(row, n).id == "r1"


def test_parquet_objects_that_name_a_field_twice_are_refused_before_any_row(tmp_path: Path) -> None:
    """A Parquet struct may hold two fields of one name (messages whose objects have two 'content' fields): pyarrow
    refuses to read such a row as Python, which stopped the run in the middle with a message naming neither the
    column nor the field. The footers say so before any row is scored."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    fields = [pa.field("role", pa.string()), pa.field("content", pa.string()), pa.field("content", pa.string())]
    structs = pa.StructArray.from_arrays([pa.array(["tool"]), pa.array([P]), pa.array(["x"])], fields=fields)
    messages = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), structs)
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": ["r1"], "messages": messages}), path)
    with pytest.raises(ConfigError, match=r"'messages\[\]' names 'content' twice, in the objects of column 'messages'"):
        read_rows(path)  # before any row is read


def test_whether_a_file_has_rows_reads_up_to_its_first_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """score's empty-input check read every line of the input (count_rows) before the run read it again: on a large
    file a whole extra pass. ``at_most`` stops the count there; the full count is unchanged."""
    from groundjudge.io.tables import count_rows

    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text(
        "\n" + "".join(json.dumps({"id": str(i), "answer": "a", "contexts": [P]}) + "\n" for i in range(5))
    )
    csv_file = tmp_path / "in.csv"
    csv_file.write_text("id,answer\n\n" + "".join(f"{i},a\n" for i in range(5)))
    for path, fmt in ((jsonl, "jsonl"), (csv_file, "csv")):
        assert count_rows(path, fmt) == 5 and count_rows(path, fmt, at_most=1) == 1 and count_rows(path, fmt, 2) == 2
    import groundjudge.io.tables as tables

    pulled: list[int] = []
    real = tables.read_lines

    def counted(path: Any) -> Any:
        for n, line in real(path):
            pulled.append(n)
            yield n, line

    monkeypatch.setattr(tables, "read_lines", counted)
    assert count_rows(jsonl, "jsonl", at_most=1) == 1 and pulled == [1, 2]  # a blank line, then the first row


@pytest.mark.parametrize("name", ["answers.jsonl", "answers.csv", "answers.parquet", "answers.parquet/"])
def test_a_file_that_is_not_there_is_a_usage_error_naming_it(tmp_path: Path, name: str, shared_nli: Any) -> None:
    """``Evaluator.run("answers.jsonl")`` and ``assert_file_grounded("tests/answers.jsonl")`` from another folder
    raised a bare FileNotFoundError from deep in the reader (``groundjudge score`` said "no input file"): a library
    error is a GroundjudgeError, and this one names the file, before any row."""
    from groundjudge.testing import assert_file_grounded
    from tests.conftest import make_nli_evaluator

    missing = tmp_path / name
    with pytest.raises(ConfigError, match=f"no input file {missing}"):
        read(missing)
    with pytest.raises(ConfigError, match="no input file"):
        assert_file_grounded(str(missing), evaluator=make_nli_evaluator(shared_nli, tmp_path))


def test_one_row_given_as_a_dict_where_rows_go_says_so(tmp_path: Path, shared_nli: Any) -> None:
    """``ev.run({"answer": ..., "contexts": [...]})`` iterated the dict: each key came back as an ERROR row ("a row
    must be a JSON object, not str"). One dict where rows go is now a usage error saying to pass a list."""
    from groundjudge.io.tables import as_rows
    from tests.conftest import make_nli_evaluator

    row = {"id": "a", "answer": "Paris is in France.", "contexts": ["Paris is in France."]}
    ev = make_nli_evaluator(shared_nli, tmp_path)
    for call in (lambda: ev.run(row), lambda: list(ev.evaluate_many(row)), lambda: read(row), lambda: as_rows(row)):
        with pytest.raises(ConfigError, match=r"one row \(a dict\) given where rows go: pass a list of rows"):
            call()
    assert [r.id for r in ev.run([row]).reports] == ["a"]  # as a list, the row is scored


def test_a_dataframe_with_columns_of_two_levels_is_refused_naming_them() -> None:
    """A DataFrame whose columns are a MultiIndex (a pivot, a groupby) had tuples for names: no column matched, and
    every row came back as an error of its own ("no contexts"), none saying why. It is refused before any row."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([["a", "Paris is in France.", "Paris is in France."]])
    frame.columns = pd.MultiIndex.from_tuples([("row", "id"), ("row", "answer"), ("row", "contexts")])
    with pytest.raises(ConfigError, match="columns have 2 levels"):
        read(frame)
