"""One rule for a gold label in every command that reads one (``io.labels.gold_label``).

An attack found gold labels read by three rules: ``calibrate`` and ``metrics`` upper-cased a row's label without
trimming it and left out any label they did not know (``"SUPPORTED "`` with a trailing space, a typo ``"SUPORTED"``,
``"supported\\n"``), silently: the precision a user fits or measures moved, and nothing said why. ``tune`` trimmed them
and refused the typo. Now every reader trims and case-folds a label, and a label that is none of the five
(SUPPORTED / UNSUPPORTED / CONTRADICTED, consistent / hallucinated) is an error naming the row and the field; a
missing or empty label is no label (the row is unlabelled), as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.errors import InputError
from groundjudge.io.reports import dumps
from groundjudge.io.rows import parse_sample
from groundjudge.learn.labels import collect_labels
from groundjudge.learn.tune import load_examples
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Scores
from groundjudge.review.metrics import label_metrics, read_labels, review_from_row
from groundjudge.review.summary import summarize
from tests.conftest import SHARED_MODEL, write_jsonl

CONTEXT = "The Eiffel Tower is in Paris. It was completed in 1889."
CLAIMS = ["The Eiffel Tower is in Paris.", "The Eiffel Tower is in Rome.", "It was completed in 1889."]
# as users' files hold them: spaces, a line end, any case
TRIMMED = ["SUPPORTED ", "contradicted", "supported\n", " Unsupported", "UNSUPPORTED", "SUPPORTED"]
TYPO = [*TRIMMED[:2], "SUPORTED", *TRIMMED[3:]]  # row 3 (id r2)
CANONICAL = ["SUPPORTED", "CONTRADICTED", "SUPPORTED", "UNSUPPORTED", "UNSUPPORTED", "SUPPORTED"]


def _rows(labels: list[str]) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "contexts": [CONTEXT], "claim": CLAIMS[i % 3], "label": label} for i, label in enumerate(labels)
    ]


def _reports(labels: list[str]) -> list[AnswerReport]:
    """A 'score' OUT of the claim rows: one claim each, scored locally."""
    out = []
    for i, label in enumerate(labels):
        ent = 0.9 if CANONICAL[i] == "SUPPORTED" else 0.1
        verdict = ClaimVerdict(
            claim=Claim(id="c0", text=CLAIMS[i % 3]),
            label="SUPPORTED" if ent > 0.5 else "UNSUPPORTED",
            route="nli",
            nli=ClaimNLI(entailment=ent, contradiction=0.05, passages_scored=1, passages_total=1),
        )
        out.append(
            AnswerReport(
                id=f"r{i}",
                verdict="PASS" if ent > 0.5 else "FAIL",
                mode="nli",
                label=label,
                claims=[verdict],
                contexts=[CONTEXT],
                scores=Scores(combined=ent, n_claims=1, n_supported=int(ent > 0.5), n_unsupported=int(ent < 0.5)),
            )
        )
    return out


def _out(tmp_path: Path, labels: list[str]) -> Path:
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(dumps(r) + "\n" for r in _reports(labels)), encoding="utf-8")
    return path


# -- the rule ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given,label",
    [
        ("SUPPORTED ", "SUPPORTED"),
        ("supported\n", "SUPPORTED"),
        ("\tContradicted", "CONTRADICTED"),
        (" Consistent ", "consistent"),
        ("HALLUCINATED", "hallucinated"),
        (None, None),
        ("", None),
        ("  ", None),  # an empty cell is no label: the row is unlabelled, as a missing label is
    ],
)
def test_the_row_contract_gives_the_canonical_label(given: Any, label: str | None) -> None:
    assert parse_sample({"contexts": ["a"], "claim": "b", "label": given}, 1).label == label


@pytest.mark.parametrize("given", ["SUPORTED", "maybe", "SUPPORTED.", 1, 0.5, True])
def test_an_unknown_label_is_the_rows_error_naming_the_field(given: Any) -> None:
    with pytest.raises(InputError, match=r"row 7, field 'label': .*not one of SUPPORTED") as exc:
        parse_sample({"contexts": ["a"], "claim": "b", "label": given}, 7)
    assert exc.value.row == 7 and exc.value.field == "label"


# -- the commands agree ----------------------------------------------------------------------------------------------


def test_metrics_reads_trimmed_labels_and_refuses_a_typo(tmp_path: Path) -> None:
    m = label_metrics(_reports(TRIMMED))
    assert m["n"] == len(TRIMMED) and m["unlabelled"] == 0  # "SUPPORTED " was left out, unlabelled
    assert m["level"] == "claim"
    assert summarize(_reports(TRIMMED)).corrected_unsupported_rate == m["corrected_unsupported_rate"]
    result = CliRunner().invoke(app, ["metrics", str(_out(tmp_path, TYPO)), "--json"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "'r2'" in said and "field 'label'" in said and "'SUPORTED'" in said


def test_calibrate_reads_trimmed_labels_and_refuses_a_typo(tmp_path: Path) -> None:
    found = collect_labels(_reports(TRIMMED), from_out=True, source="scored.jsonl")
    assert found.labels == CANONICAL and found.taught == {"gold": len(TRIMMED)}
    with pytest.raises(InputError, match=r"'r2'.*field 'label': 'SUPORTED'"):
        collect_labels(_reports(TYPO), from_out=True, source="scored.jsonl")
    config = tmp_path / "cfg.json"
    result = CliRunner().invoke(app, ["calibrate", str(_out(tmp_path, TYPO)), "--out", str(config)])
    assert result.exit_code == 2 and "field 'label'" in result.output and "'r2'" in result.output, result.output
    assert not config.exists()


def test_calibrate_refuses_a_typo_in_claim_rows_naming_the_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    rows = write_jsonl(tmp_path / "rows.jsonl", _rows(TYPO))
    config = tmp_path / "cfg.json"
    result = CliRunner().invoke(app, ["calibrate", str(rows), "--out", str(config), "--cache-dir", str(tmp_path)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "row 3, field 'label'" in said and "'SUPORTED'" in said, result.output
    assert not config.exists()


def test_tune_reads_the_same_rows_by_the_same_rule(tmp_path: Path) -> None:
    examples = load_examples([write_jsonl(tmp_path / "rows.jsonl", _rows(TRIMMED))], tokenizer=None)
    assert [e.label for e in examples] == CANONICAL
    with pytest.raises(InputError, match=r"row rows.jsonl:3, field 'label': .*'SUPORTED' is not one of"):
        load_examples([write_jsonl(tmp_path / "rows.jsonl", _rows(TYPO))], tokenizer=None)
    # an answer label or none is no claim's label: tune needs one on each claim row
    for label in ("consistent", None):
        with pytest.raises(InputError, match=r"row rows.jsonl:1, field 'label'"):
            load_examples([write_jsonl(tmp_path / "rows.jsonl", [{**_rows(TRIMMED)[0], "label": label}])], None)


def test_a_labels_file_and_a_review_line_read_labels_by_the_same_rule(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"r{i}", "label": label}) + "\n" for i, label in enumerate([*TRIMMED, " "])),
        encoding="utf-8",
    )
    assert read_labels(path) == {f"r{i}": label for i, label in enumerate(CANONICAL)}  # " ": no label
    path.write_text("".join(json.dumps({"id": f"r{i}", "label": label}) + "\n" for i, label in enumerate(TYPO)))
    with pytest.raises(InputError, match=r"row 3, field 'label': 'SUPORTED'"):
        read_labels(path)
    line = {"id": "r0", "claim_id": "c0", "claim": CLAIMS[0], "label": "supported "}
    assert review_from_row(line, 1).label == "SUPPORTED"
    with pytest.raises(InputError, match=r"row 1, field 'label': 'SUPORTED'"):
        review_from_row({**line, "label": "SUPORTED"}, 1)
    with pytest.raises(InputError, match=r"row 1, field 'label'"):  # an answer's label is no claim's
        review_from_row({**line, "label": "consistent"}, 1)
