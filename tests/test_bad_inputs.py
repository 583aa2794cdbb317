"""A corpus of bad and strange inputs through ``groundjudge score``: every row ends as one report, nothing crashes.

Run as a user runs it (a subprocess, so a traceback would be seen), in nli mode, with the tiny random NLI model;
then with the shared model in this process (typer's runner, a traceback written to stderr as a user would see it).
One line of input is one report of output, in order; a row that cannot be scored is an ERROR naming its row (and
field); exit code 1 because some rows failed; no NaN or Infinity in OUT.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from groundjudge.testing import tiny_nli_model
from tests.conftest import ROOT, SHARED_MODEL

P = "The library opens at 9 am. It has 40000 books. Members can borrow five books at a time."


def js(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


@dataclass
class Case:
    name: str
    line: bytes  # without its line end
    error: str | None = None  # None: a report that is not ERROR; else a text its error must contain
    field: str | None = None  # the field the error names
    end: bytes = b"\n"
    verdict: str | None = None  # the verdict, where it is known whatever the model


CASES = [
    Case("bom", b"\xef\xbb\xbf" + js({"id": "bom", "contexts": [P], "answer": "The library opens at 9 am."})),
    Case("empty-answer", js({"id": "empty-answer", "contexts": [P], "answer": ""}), verdict="NO_CLAIMS"),
    Case(
        "empty-context",
        js({"id": "empty-context", "contexts": [""], "answer": "It opens at 9."}),
        "is empty",
        "contexts",
    ),
    Case("empty-id", js({"id": "", "contexts": [P], "answer": "It has 40000 books."})),
    Case("empty-claim", js({"id": "empty-claim", "contexts": [P], "claim": " "}), "is empty", "claim"),
    Case(
        "context-10k", js({"id": "context-10k", "contexts": [(P + " ") * 115], "answer": "Members borrow five books."})
    ),
    Case(
        "context-2mb",
        js({"id": "context-2mb", "contexts": ["Filler sentence number 7 is here. " * 58000 + P], "answer": P}),
    ),
    Case(
        "control",
        js({"id": "control", "contexts": ["\x01\x07\x1b[31m" + P + "\x00"], "answer": "It opens\x0b at 9 am.\x1f"}),
    ),
    Case(
        "rtl",
        js(
            {
                "id": "rtl",
                "contexts": [
                    "הספרייה נפתחת בשעה 9 בבוקר ויש בה ארבעים אלף ספרים. المكتبة تفتح الساعة 9 صباحا. \u202e" + P
                ],
                "answer": "הספרייה נפתחת בשעה 9 בבוקר. المكتبة تفتح الساعة 9 صباحا.",
            }
        ),
    ),
    Case(
        "emoji", js({"id": "emoji", "contexts": ["📚 " + P + " 👩‍🔬🇫🇷"], "answer": "The library 📚 opens at 9 am. 👍"})
    ),
    Case(
        "newlines",
        js(
            {
                "id": "newlines",
                "contexts": ["The library opens at 9 am.\r\nIt has 40000 books.\rMembers can borrow\u2028five.\u2029"],
                "answer": "It opens at 9 am.\r\nIt has 40000 books.\rMembers can borrow\u2028five books.",
            }
        ),
        end=b"\r\n",
    ),
    Case(
        "casefold",
        js(
            {
                "id": "casefold",
                "contexts": ["İstanbul'da KİTAPLIK 9'da açılır. Die Straße ist lang. The ﬁrst ﬂoor has 40000 books."],
                "answer": "İSTANBUL'DA kitaplık 9'da açılır. Die STRASSE ist lang. The first floor has 40000 books.",
            }
        ),
    ),
    Case(
        "surrogate",
        b'{"id": "surrogate", "contexts": ["' + P.encode() + b'"], "answer": "a \\ud800 b c"}',
        "surrogate",
        "answer",
    ),
    Case(
        "latin1",
        b'{"id": "latin1", "contexts": ["caf\xe9 opens at 9"], "answer": "It opens at 9."}',
        "not UTF-8: byte 0xe9",
    ),
    Case(
        "duplicate",
        js({"id": "bom", "contexts": [P], "answer": "Another row with id bom."}),
        "duplicate id 'bom'",
        "id",
    ),
    Case("list", b"[1, 2, 3]", "must be a JSON object"),
    Case("string", b'"just a string"', "must be a JSON object"),
    Case("null", b"null", "must be a JSON object"),
    Case(
        "contexts-string",
        js({"id": "contexts-string", "contexts": P, "answer": "It opens at 9 am."}),
        "wrap it in a list",
        "contexts",
    ),
    Case("context-string", js({"id": "context-string", "context": P, "answer": "The library opens at 9 am."})),
    Case("numbers", js({"id": 5, "contexts": [1, 2], "answer": 3}), "must be a list of strings", "contexts"),
    Case("number-answer", js({"id": "number-answer", "contexts": [P], "answer": 12}), "must be a string", "answer"),
    Case(
        "number-question",
        js({"id": "nq", "contexts": [P], "answer": P, "question": 1.5}),
        "must be a string",
        "question",
    ),
    Case("nan", b'{"id": "nan", "contexts": ["x y z"], "answer": "a b c", "metadata": {"x": NaN}}', "NaN is not"),
    Case(
        "infinity", b'{"id": "inf", "contexts": ["x y z"], "answer": "a b c", "metadata": {"x": -Infinity}}', "Infinity"
    ),
    Case(
        "overflow", b'{"id": "big", "contexts": ["x y z"], "answer": "a b c", "metadata": {"x": 1e999}}', "out of range"
    ),
    Case("broken-json", b'{"id": "broken", "contexts": [', "invalid JSON"),
    Case("deep-json", b"[" * 100000, "nested too deeply"),
    Case("good-last", js({"id": "good-last", "contexts": [P], "answer": "Members can borrow five books at a time."})),
]

# Cases that another change must fix first: strict, so that they turn into failures (to un-mark) once it lands.
PENDING: dict[str, str] = {}


def corpus(path: Path) -> dict[str, int]:
    """Write the corpus with a blank line in the middle; returns each case's line number."""
    lines, numbers = [], {}
    for case in CASES:
        if case.name == "list":
            lines.append(b"\n")  # a blank line is not a row
        lines.append(case.line + case.end)
        numbers[case.name] = len(lines)
    path.write_bytes(b"".join(lines))
    return numbers


@dataclass
class Run:
    code: int
    stderr: str
    reports: list[dict[str, Any]]
    rows: dict[str, int]


def refuse(name: str) -> Any:
    raise AssertionError(f"{name} written into OUT")


def run_cli(tmp: Path, data: Path, model: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``groundjudge score DATA`` as a user runs it; (the process, OUT)."""
    out = tmp / "out.jsonl"
    cmd = [sys.executable, "-m", "groundjudge", "score", str(data), "--out", str(out), "--no-progress", *extra]
    cmd += ["--cache-dir", str(tmp / "cache"), "--batch-size", "4"]
    env = {**os.environ, "GROUNDJUDGE_NLI_MODEL": str(model), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600), out


def run_cli_here(tmp: Path, data: Path, model: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """:func:`run_cli` in this process (typer's runner): for the table tests, which need no fresh process and
    would pay 10 s of CPU each for one (torch and the model loaded again). An exception the command did not turn
    into an exit code is written to stderr as the traceback a user would see."""
    import traceback

    from typer.testing import CliRunner

    from groundjudge.cli import app

    out = tmp / "out.jsonl"
    args = ["score", str(data), "--out", str(out), "--no-progress", "--nli-model", str(model), *extra]
    args += ["--cache-dir", str(tmp / "cache"), "--batch-size", "4"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, stderr), out


def read_reports(out: Path) -> list[dict[str, Any]]:
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    # splitlines() splits on U+2028 and U+0085 too: OUT must escape them, so that every tool reads one report a line
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def score(tmp: Path, model: Path, here: bool = False) -> Run:
    """The corpus through ``groundjudge score`` in a subprocess (``here``: in this process)."""
    data = tmp / "in.jsonl"
    rows = corpus(data)
    proc, out = (run_cli_here if here else run_cli)(tmp, data, model)
    return Run(proc.returncode, proc.stderr, read_reports(out), rows)


@pytest.fixture(scope="module")
def tiny(tiny_nli: Path) -> Path:
    return tiny_nli


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, tiny: Path) -> Run:
    return score(tmp_path_factory.mktemp("bad-tiny"), tiny)


def check_run(run: Run) -> None:
    assert run.code == 1, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert [r["row"] for r in run.reports] == list(run.rows.values())  # one report per row, in order
    ids = [r["id"] for r in run.reports]
    assert len(ids) == len(set(ids))
    assert "groundjudge summary" in run.stderr


def check_case(run: Run, case: Case) -> None:
    n = run.rows[case.name]
    report = next(r for r in run.reports if r["row"] == n)
    if case.verdict is not None:
        assert report["verdict"] == case.verdict and not report["errors"], report
    elif case.error is None:
        assert report["verdict"] not in ("ERROR", "NO_CLAIMS") and not report["errors"], report["errors"]
        text = report["answer"]
        for c in report["claims"]:  # offsets exact: the span is the text it claims to be, whatever the Unicode
            span = c["claim"]["span"]
            assert span is None or text[span["start"] : span["end"]] == span["text"]
            for p in (c["nli"] or {}).get("entailment_passage"), (c["nli"] or {}).get("contradiction_passage"):
                if p:
                    assert report["contexts"][p["doc"]][p["start"] : p["end"]] == p["text"]
    else:
        assert report["verdict"] == "ERROR" and len(report["errors"]) == 1
        error = report["errors"][0]
        where = f"row {n}, field {case.field!r}" if case.field else f"row {n}"
        assert error.startswith(where + ":") and case.error in error, error


def test_every_row_ends_as_a_report(tiny_run: Run) -> None:
    check_run(tiny_run)
    flat = " ".join(tiny_run.stderr.replace("│", " ").split())
    failed = sum(c.error is not None for c in CASES)
    assert f"rows failed {failed}" in flat and f"answers {len(CASES)}" in flat


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=PENDING[c.name])) if c.name in PENDING else c
        for c in CASES
    ],
    ids=[c.name for c in CASES],
)
def test_each_case(tiny_run: Run, case: Case) -> None:
    check_case(tiny_run, case)


def test_the_same_corpus_with_the_shared_model(shared_nli: Any, tmp_path: Path) -> None:
    # in this process, with the model the session loaded: the subprocess run above is the one a user makes
    run = score(tmp_path, SHARED_MODEL, here=True)
    check_run(run)
    for case in CASES:
        if case.name not in PENDING:
            check_case(run, case)
    verdicts = {name: next(r["verdict"] for r in run.reports if r["row"] == n) for name, n in run.rows.items()}
    assert verdicts["good-last"] == "PASS" and verdicts["bom"] == "PASS"  # real rows still judged on their merits


def test_a_model_that_returns_nan_writes_no_nan(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    path = tiny_nli_model(tmp_path / "nan-nli", SHARED_MODEL)
    broken = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
    with torch.no_grad():
        broken.classifier.bias.fill_(float("nan"))
    broken.save_pretrained(str(path))
    run = score(tmp_path, path, here=True)  # what NaN does to a report needs no process of its own
    check_run(run)
    for case in CASES:
        report = next(r for r in run.reports if r["row"] == run.rows[case.name])
        if case.error is None and report["claims"]:  # a NaN score never passes: the row failed, and says so
            assert report["verdict"] == "ERROR" or report["errors"], (case.name, report["verdict"])


# -- tables: CSV, Parquet, --map ---------------------------------------------------------------------------------

CTX = '"[""' + P + '""]"'  # a CSV cell holding the JSON list [P]


def check_table_run(proc: subprocess.CompletedProcess[str], reports: list[dict[str, Any]], rows: int) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert [r["row"] for r in reports] == list(range(1, rows + 1)), proc.stderr[-3000:]  # one report per row


def test_csv_an_unclosed_quote_is_its_rows_error_and_the_rows_after_it_are_read(tiny: Path, tmp_path: Path) -> None:
    # the old reader took every line after the quote into one cell: 2 reports for 4 rows, exit 0
    data = tmp_path / "in.csv"
    text = (
        "id,contexts,answer\n"
        f"first,{CTX},The library opens at 9 am.\n"
        f'open,{CTX},"It has 40000 books.\n'  # the quote is never closed
        f'multi,{CTX},"Members can borrow\nfive books at a time."\n'  # a cell over two lines: fine
        f"last,{CTX},It has 40000 books.\n"
    )
    data.write_text(text, encoding="utf-8")
    proc, out = run_cli_here(tmp_path, data, tiny)
    reports = read_reports(out)
    check_table_run(proc, reports, 4)
    assert proc.returncode == 1
    assert [r["id"] for r in reports] == ["first", "row-2", "multi", "last"]
    assert reports[1]["verdict"] == "ERROR" and len(reports[1]["errors"]) == 1
    assert reports[1]["errors"][0].startswith("row 2, field 'answer': unclosed quote"), reports[1]["errors"]
    assert "line 3" in reports[1]["errors"][0]  # where to look in the file
    assert reports[2]["answer"] == "Members can borrow\nfive books at a time."
    assert all(r["verdict"] != "ERROR" for r in reports if r["row"] != 2)


def test_csv_a_non_utf8_byte_is_its_rows_error(tiny: Path, tmp_path: Path) -> None:
    # the old reader crashed with a UnicodeDecodeError traceback
    data = tmp_path / "in.csv"
    lines = [
        "id,contexts,answer",
        f"first,{CTX},The library opens at 9 am.",
        f"latin1,{CTX},The caf\xe9 opens at 9 am.",
        f"last,{CTX},It has 40000 books.",
    ]
    data.write_bytes(b"\r\n".join(line.encode("latin-1") for line in lines) + b"\r\n")
    proc, out = run_cli_here(tmp_path, data, tiny)
    reports = read_reports(out)
    check_table_run(proc, reports, 3)
    assert proc.returncode == 1
    assert reports[1]["verdict"] == "ERROR" and reports[1]["id"] == "row-2"
    assert reports[1]["errors"] == ["row 2, field 'answer': is not UTF-8: byte 0xe9 at character 8 of the cell"]
    assert reports[0]["verdict"] != "ERROR" and reports[2]["verdict"] != "ERROR"


def test_csv_list_cells_that_pandas_wrote_are_lists(tiny: Path, tmp_path: Path) -> None:
    # DataFrame.to_csv writes a list cell as Python's repr (['a', "b's"]), not JSON; the old reader took the repr
    # for one context, and the row passed
    pd = pytest.importorskip("pandas")
    data = tmp_path / "in.csv"
    contexts = ["The library opens at 9 am.", "It has 40000 books,\nand members can 'borrow' five at a time."]
    frame = pd.DataFrame({"id": ["pandas"], "answer": ["It has 40000 books."], "contexts": [contexts]})
    frame.to_csv(data, index=False)
    assert "['The library" in data.read_text(encoding="utf-8")
    proc, out = run_cli_here(tmp_path, data, tiny)
    reports = read_reports(out)
    check_table_run(proc, reports, 1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert reports[0]["contexts"] == contexts


def write_table(path: Path, rows: list[dict[str, Any]]) -> None:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".csv":
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows)
    else:
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_a_map_to_a_column_the_table_lacks_is_a_usage_error(tiny: Path, tmp_path: Path, suffix: str) -> None:
    # the old reader ignored it: ids became row-N, the reference was dropped, exit 0
    data = tmp_path / f"in{suffix}"
    write_table(data, [{"id": "a", "answer": "It has 40000 books.", "contexts": [P], "ref": "40000."}] * 2)
    proc, out = run_cli_here(tmp_path, data, tiny, "--map", "id=key,reference=ref,question=q")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    message = " ".join(proc.stderr.split())
    assert "'key', 'q'" in message and "'ref'" not in message, message  # the missing ones, not the one it has
    assert "columns found: id, answer, contexts, ref" in message
    assert not out.exists()


@pytest.mark.parametrize("content", [b"", b"PAR1 this is not Parquet PAR1"], ids=["empty", "corrupt"])
def test_an_empty_or_corrupt_parquet_file_is_a_usage_error(tiny: Path, tmp_path: Path, content: bytes) -> None:
    # the old reader crashed with a pyarrow traceback
    pytest.importorskip("pyarrow")
    data = tmp_path / "in.parquet"
    data.write_bytes(content)
    proc, out = run_cli_here(tmp_path, data, tiny)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert str(data) in proc.stderr and "Parquet" in proc.stderr and not out.exists()
