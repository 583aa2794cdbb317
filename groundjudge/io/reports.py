"""The report line: the one format of a report file (``groundjudge score`` output, one :class:`AnswerReport` a
line), written by both engines and read by every command.

``dumps`` writes a line (strict JSON, after :func:`finite_report` made the report finite), ``read_reports`` reads
a file back, its JSONL or its Parquet (``last_reports``: the report of each id that counts), ``is_report_file`` /
``is_report_row`` tell a report from an input row (``is_review_row``: a reviewer's decision), and ``write_parquet``
converts a report file to Parquet.

Imports only ``models``, ``errors`` and ``io.jsonl``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundjudge.atomic import atomic_writer
from groundjudge.errors import ArgumentError, ConfigError
from groundjudge.io.jsonl import read_jsonl, read_lines
from groundjudge.models import AnswerReport, Scores

__all__ = [
    "dumps",
    "finite_report",
    "is_finite",
    "is_parquet_file",
    "is_report_file",
    "is_report_row",
    "is_review_row",
    "last_reports",
    "read_reports",
    "write_parquet",
]


def dumps(report: AnswerReport) -> str:
    """One JSONL line; strict JSON (a NaN or Infinity raises ValueError: pass the report through
    :func:`finite_report` first). Characters that ``str.splitlines`` takes for line ends are escaped."""
    return json.dumps(report.model_dump(mode="json"), ensure_ascii=False, allow_nan=False).translate(_LINE_ENDS)


# JSON escapes control characters itself; these three are not control characters but splitlines() splits on them
_LINE_ENDS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def is_finite(value: Any) -> bool:
    """Whether ``value`` is not a float or a finite one (NaN and Infinity are not)."""
    return not isinstance(value, float) or math.isfinite(value)


def _non_finite_paths(obj: Any, path: str = "") -> list[str]:
    """Where ``obj`` (plain JSON data) holds NaN or Infinity, as dotted paths."""
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _non_finite_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _non_finite_paths(v, f"{path}[{i}]")]
    return [] if is_finite(obj) else [path or "value"]


def _scrub(obj: Any) -> Any:
    """``obj`` with every non-finite number replaced by None."""
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj if is_finite(obj) else None


def finite_report(report: AnswerReport) -> AnswerReport:
    """``report`` itself when it holds only finite numbers; else an ERROR report of that row that says where.

    A NaN or Infinity is never written: claims whose NLI scores were not finite keep their text but lose the
    scores and become ERROR, every other non-finite number becomes null, and the scores (not the counts) are
    cleared.
    """
    data = report.model_dump(mode="json")
    paths = _non_finite_paths(data)
    if not paths:
        return report
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    message = f"non-finite number (NaN or Infinity) in {shown}: the report cannot be trusted"
    clean = _scrub(data)
    clean.pop("nli_pairs", None)
    for claim in clean.get("claims", []):
        nli = claim.get("nli")
        if isinstance(nli, dict) and any(
            v is None for k, v in nli.items() if k in ("entailment", "contradiction", "neutral")
        ):
            claim.update(nli=None, label="ERROR", error="non-finite NLI score")
    counts = {k: v for k, v in clean["scores"].items() if k.startswith("n_")}
    clean.update(
        verdict="ERROR",
        verdict_reasons=[f"ERROR: {message}"],
        scores={**Scores().model_dump(), **counts},
        errors=[*report.errors, message],
    )
    try:
        return AnswerReport.model_validate(clean)
    except ValidationError:  # something else held the number: keep only what identifies the row
        return AnswerReport(
            id=report.id,
            verdict="ERROR",
            mode=report.mode,
            scores=Scores(),
            errors=[*report.errors, message],
            row=report.row,
            label=report.label,
        )


def read_reports(path: str | Path) -> Iterator[AnswerReport]:
    """Reports from a file written by ``groundjudge score``: its JSONL OUT, read line by line with the one JSONL
    reader's rules (a byte order mark skipped, blank lines skipped; a torn last line, a killed run, is skipped), or
    its Parquet OUT (:func:`write_parquet`; told by the file's magic bytes, whatever its name), read from its
    ``report`` column.

    Raises:
        ValueError: a line (a Parquet row) that is not a report, its number in the message; a Parquet file with no
            ``report`` column.
    """
    if is_parquet_file(path):
        yield from _parquet_reports(path)
        return
    for n, raw in read_lines(path):
        if not raw.strip():
            continue
        try:
            report = AnswerReport.model_validate_json(raw)
        except ValueError as exc:
            if not raw.endswith(b"\n"):
                return  # the last line of a run that was killed mid-write
            raise ArgumentError(f"line {n}: {_not_a_report(raw) or exc}") from exc
        yield _in_range(report, f"line {n}")


def _in_range(report: AnswerReport, where: str) -> AnswerReport:
    wrong = out_of_range(report)
    if wrong:
        raise ArgumentError(f"{where} (id {report.id!r}): {'; '.join(wrong)}: no score groundjudge writes")
    return report


_PARQUET_MAGIC = b"PAR1"


def is_parquet_file(path: str | Path) -> bool:
    """Whether ``path`` is a Parquet file (it opens with Parquet's magic bytes); a directory or a file that cannot be
    read is not one (the JSONL reader says why)."""
    try:
        with Path(path).open("rb") as fh:
            return fh.read(len(_PARQUET_MAGIC)) == _PARQUET_MAGIC
    except OSError:
        return False


def _parquet_file(path: str | Path) -> tuple[Any, list[str]]:
    """The Parquet file at ``path`` (pyarrow's ``ParquetFile``) and its column names.

    Raises:
        ConfigError: pyarrow is not installed. ArgumentError: not a readable Parquet file.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("reading Parquet needs pyarrow: pip install 'groundjudge[parquet]'") from None
    try:
        table = pq.ParquetFile(path)
        return table, list(table.schema_arrow.names)
    except (OSError, ValueError) as exc:  # a cut file: pyarrow's ArrowInvalid is a ValueError, ArrowIOError OSError
        raise ArgumentError(f"not a readable Parquet file: {exc}") from exc


def _parquet_columns(path: str | Path) -> list[str]:
    return _parquet_file(path)[1]


def _parquet_reports(path: str | Path) -> Iterator[AnswerReport]:
    """The reports of a Parquet OUT (:func:`write_parquet`): its ``report`` column, row by row."""
    table, names = _parquet_file(path)
    if "report" not in names:
        raise ArgumentError(
            f"a Parquet file with no 'report' column (columns: {', '.join(names)}): not one 'groundjudge score' wrote"
        )
    n = 0
    for batch in table.iter_batches(columns=["report"]):
        for raw in batch.column(0).to_pylist():
            n += 1
            try:
                report = AnswerReport.model_validate_json(raw if isinstance(raw, str) else "")
            except ValueError as exc:
                raise ArgumentError(f"row {n}: column 'report' holds no report: {exc}") from exc
            yield _in_range(report, f"row {n}")


# the scores of a report that are shares, in [0, 1] (the counts are n_*)
_SHARES = tuple(k for k, f in Scores.model_fields.items() if f.annotation == (float | None))


def out_of_range(report: AnswerReport) -> list[str]:
    """What in ``report`` no run writes: a finite share outside [0, 1] or a negative count among its scores, or a
    probability outside [0, 1] among its claims' NLI results (the entailment, contradiction, neutral and a head's
    probability; a NaN or an infinity is the reader's to mark as not finite: a failed row). Such a line (a hand edit,
    another tool) would move every mean and paired difference it enters (one 1e308 overflowed the summary's
    histogram), and calibrate's cut-offs past 1 (fitted on stored scores), so it is not read."""
    scores = report.scores
    wrong = [
        f"scores.{k} {v!r} is outside [0, 1]"
        for k in _SHARES
        if isinstance(v := getattr(scores, k), float) and math.isfinite(v) and not 0.0 <= v <= 1.0
    ]
    counts = {k: v for k, v in scores.model_dump().items() if k.startswith("n_") and isinstance(v, int)}
    wrong += [f"scores.{k} {v} is negative" for k, v in counts.items() if v < 0]
    return wrong + [
        f"claims[{i}].nli.{k} {v!r} is outside [0, 1]"
        for i, c in enumerate(report.claims)
        if c.nli is not None
        for k in ("entailment", "contradiction", "neutral", "supported")
        if isinstance(v := getattr(c.nli, k), float) and not 0.0 <= v <= 1.0
    ]


def last_reports(reports: Iterable[AnswerReport]) -> tuple[list[AnswerReport], int]:
    """The report that counts for each id, its last (a ``--retry-errors`` run appends the new report after the old
    one, and one stopped before it compacted OUT leaves both), in the order of those last lines, as
    ``runs.out.rewrite_out`` leaves OUT; and how many earlier reports were left out. Every command that reads a
    report file counts an answer once: a stale ERROR line beside its new report is neither a second answer nor a
    failure."""
    last: dict[str, tuple[int, AnswerReport]] = {}
    n = 0
    for n, r in enumerate(reports, start=1):
        last.pop(r.id, None)  # re-inserted at its last line's place
        last[r.id] = (n, r)
    return [r for _, r in last.values()], n - len(last)


def is_report_file(path: str | Path) -> bool:
    """Whether ``path`` holds reports (``groundjudge score`` output) rather than input rows: a JSONL file whose first
    row that parses has a verdict and claims, or a Parquet OUT (:func:`is_parquet_file` with a ``report`` column, as
    :func:`read_reports` reads it); a CSV file, a folder or a file that cannot be read is not one."""
    if is_parquet_file(path):
        try:
            return "report" in _parquet_columns(path)
        except ArgumentError:
            return False
    if Path(path).suffix.lower() in (".csv", ".parquet") or Path(path).is_dir():
        return False
    try:
        first = next((row for _, row in read_jsonl(Path(path)) if isinstance(row, dict)), {})
    except OSError:
        return False
    return is_report_row(first)


def _not_a_report(raw: bytes) -> str | None:
    """What a line that is no report is, when it is plainly something else (an input row, a review), said instead of
    the validator's list of every missing field; None otherwise."""
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(row, dict) or is_report_row(row):
        return None
    if is_review_row(row):
        return "a review (a claim's decision), not a report: give the file 'groundjudge score' wrote (its --out)"
    if any(k in row for k in ("answer", "contexts", "claim", "messages")):
        return "an input row (no verdict and claims), not a report: give the file 'groundjudge score' wrote (its --out)"
    return None


def is_report_row(row: Any) -> bool:
    """Whether a parsed JSON row is a report (``groundjudge score`` output) rather than an input row or a review:
    the one rule calibrate and tune tell their inputs apart by."""
    return isinstance(row, dict) and "verdict" in row and "claims" in row


def is_review_row(row: Any) -> bool:
    """Whether a parsed JSON row is a reviewer's decision on a claim (``review export``, the review page's export):
    it names its claim (``claim_id``) and is no report; the one rule tune and the report reader tell one by."""
    return isinstance(row, dict) and "claim_id" in row and not is_report_row(row)


# the usage counts a Parquet row holds, each an int64 column of the same name
_USAGE_COUNTS = ("calls", "cached_calls", "input_tokens", "output_tokens")


def _arrow_type(pa: Any, name: str, default: Any) -> Any:
    """A score column's Parquet type, as the notebook frame holds it: a flag (``claims_failed``) boolean, a count
    (``n_*``) an integer, a score or share a float (null where the report has none)."""
    if isinstance(default, bool):
        return pa.bool_()
    return pa.int64() if isinstance(default, int) or name.startswith("n_") else pa.float64()


def write_parquet(jsonl: str | Path, out: str | Path) -> int:
    """Convert a reports JSONL file (``groundjudge score`` output) into Parquet; returns the rows written.

    One row per answer: id, row, verdict, mode, the scores, usage, errors and label as columns, and the whole
    report as JSON in ``report`` (``AnswerReport.model_validate_json`` reads it back). ``unsettled_cost_usd``, the
    part of ``cost_usd`` that is a worst case of calls sent with no reply, not a billed amount (0 where none), so
    that a sum of the column is not taken for a bill.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("writing Parquet needs pyarrow: pip install 'groundjudge[parquet]'") from None

    schema = pa.schema(
        [
            ("id", pa.string()),
            ("row", pa.int64()),
            ("verdict", pa.string()),
            ("verdict_reasons", pa.string()),
            ("mode", pa.string()),
            *[(k, _arrow_type(pa, k, v)) for k, v in Scores().columns().items()],
            *[(k, pa.int64()) for k in _USAGE_COUNTS],
            ("cost_usd", pa.float64()),
            ("unsettled_cost_usd", pa.float64()),
            ("errors", pa.string()),
            ("label", pa.string()),
            ("report", pa.string()),
        ]
    )
    written = 0
    with atomic_writer(out, binary=True) as sink, pq.ParquetWriter(sink, schema) as writer:
        batch: list[dict[str, Any]] = []
        for r in read_reports(jsonl):
            batch.append(
                {
                    "id": r.id,
                    "row": r.row,
                    "verdict": r.verdict,
                    "verdict_reasons": "; ".join(r.verdict_reasons),
                    "mode": r.mode,
                    **r.scores.columns(),
                    **{k: getattr(r.usage, k) for k in _USAGE_COUNTS},
                    "cost_usd": r.usage.known_cost(),
                    "unsettled_cost_usd": r.usage.unsettled_cost_usd,
                    "errors": "; ".join(r.errors),
                    "label": r.label,
                    "report": dumps(r),
                }
            )
            if len(batch) >= 1024:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                written += len(batch)
                batch = []
        if batch or not written:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            written += len(batch)
    return written
