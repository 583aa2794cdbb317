"""Issue 29's new-user items in the command line: calibrate writes only where asked and targets what the README
says, report --only-flagged says whose numbers it shows, a summary in a CI log keeps a sane width, errors in plain
words naming the option, tune says "no verdict head stored" once, cache stats counts the lookups of every run."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.cli.common import SUMMARY_WIDTH, print_summary
from groundjudge.io.reports import read_reports
from groundjudge.review.summary import summarize
from tests.conftest import ROOT, SHARED_MODEL

runner = CliRunner()


def gold_rows(n: int = 16) -> list[dict[str, Any]]:
    """Claim rows with gold labels, a quarter of them SUPPORTED."""
    labels = ["SUPPORTED", "UNSUPPORTED", "UNSUPPORTED", "CONTRADICTED"]
    return [
        {
            "id": f"g{i}",
            "contexts": [f"The museum of city number {i} opened in {1900 + i}. It has {i + 3} rooms."],
            "claim": f"The museum of city number {i} opened in {1900 + i + (i % 4 == 3)}.",
            "label": labels[i % 4],
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from groundjudge.testing import tiny_nli_model

    return tiny_nli_model(tmp_path_factory.mktemp("tiny") / "model", SHARED_MODEL)


def test_calibrate_writes_no_config_unasked_and_targets_the_readmes_precision(
    tmp_path: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = write_jsonl(tmp_path / "labelled.jsonl", gold_rows())
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    args = [str(rows), "--nli-model", str(tiny), "--cache-dir", str(tmp_path / "c"), "--no-head", "--min-decided", "2"]
    result = runner.invoke(app, ["calibrate", *args])
    assert result.exit_code == 0, result.output
    assert list(work.iterdir()) == []  # it wrote groundjudge-config.json here, unasked
    fit = json.loads(next(x for x in result.stdout.splitlines() if x.startswith("{")))
    assert fit["config"] is None and fit["target"] == 0.9  # the README's --target 0.9; it was 0.95
    assert "No config written (pass --out FILE" in flat(result.stderr)
    # issue 33: without a head the numbers to expect are the raw thresholds' cross-fitted ones, never in-sample
    assert fit["in_force"] == "thresholds" and fit["measured"] == "cross-fitted"
    assert fit["raw"]["measured"] == "in-sample" and fit["raw"]["expected"]["cuts"] == 10
    said = flat(result.stderr)
    assert "To expect on new rows: escalation" in said and "cross-fitted local precision" in said
    # the escalation to expect is the stored thresholds' own count (nearer new rows than the halves' count)
    assert fit["raw"]["expected"]["escalation_rate"] == round(fit["raw"]["escalation_rate"], 4)
    assert fit["raw"]["expected"]["escalation_measured"] == "in-sample: the stored thresholds' count"
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]  # the README and the manual
    readme = "\n".join(p.read_text() for p in pages)
    assert all("--target 0.9 " in line for line in readme.splitlines() if "groundjudge calibrate " in line)
    written = runner.invoke(app, ["calibrate", *args, "--out", str(tmp_path / "cfg.json")])
    assert written.exit_code == 0 and json.loads((tmp_path / "cfg.json").read_text())
    assert f"Wrote {tmp_path / 'cfg.json'}" in flat(written.stderr)


def test_calibrate_names_the_config_it_wrote_whatever_brackets_its_path_holds(tmp_path: Path, tiny: Path) -> None:
    """A path is text, not console markup: '[bold]' in it was swallowed (the summary named another file), and a
    folder named '[/red]' stopped calibrate with a MarkupError traceback after the config was written."""
    rows = write_jsonl(tmp_path / "labelled.jsonl", gold_rows())
    args = [str(rows), "--nli-model", str(tiny), "--cache-dir", str(tmp_path / "c"), "--no-head", "--min-decided", "2"]
    folder = tmp_path / "d[" / "red]"
    folder.mkdir(parents=True)
    for out in (tmp_path / "[bold]cfg.json", folder / "cfg.json"):  # the second: ".../d[/red]/cfg.json"
        written = runner.invoke(app, ["calibrate", *args, "--out", str(out)])
        assert written.exit_code == 0, written.output
        assert json.loads(out.read_text()) and f"Wrote {out}" in flat(written.stderr)


def _scored(tmp_path: Path) -> Path:
    """Two reports: one that passed cleanly, one flagged (FAIL)."""
    from groundjudge.models import AnswerReport, Scores

    out = tmp_path / "out.jsonl"
    reports = []
    for rid, verdict in (("ok", "PASS"), ("bad", "FAIL")):
        reports.append(AnswerReport(id=rid, verdict=verdict, mode="nli", scores=Scores()).model_dump_json())
    out.write_text("\n".join(reports) + "\n")
    return out


def test_report_only_flagged_says_it_is_the_flagged_subset(tmp_path: Path) -> None:
    out = _scored(tmp_path)
    assert sum(r.flagged for r in read_reports(out)) == 1
    whole = runner.invoke(app, ["report", str(out)], env={"COLUMNS": "200"})
    subset = runner.invoke(app, ["report", str(out), "--only-flagged"], env={"COLUMNS": "200"})
    assert whole.exit_code == subset.exit_code == 0, subset.output
    assert "flagged" not in flat(whole.output)
    assert "groundjudge summary of the flagged answers only (1 of 2)" in flat(subset.output), subset.output


@settings(max_examples=25, deadline=None)
@given(kinds=st.dictionaries(st.text("abcdefghij_ ", min_size=1, max_size=30), st.integers(1, 999), max_size=40))
def test_a_summary_in_a_ci_log_wraps_its_values_at_a_sane_width(kinds: dict[str, int]) -> None:
    """No TTY: the summary's values wrap at SUMMARY_WIDTH (a line reached 825 characters), the labels never."""
    summary = summarize([]).model_copy(update={"error_types": kinds})
    buf = io.StringIO()
    print_summary(Console(file=buf, width=1000, soft_wrap=True, color_system=None), summary)
    text = buf.getvalue()
    longest_word = max((len(w) for w in " ".join(f"{k} {v}," for k, v in kinds.items()).split()), default=0)
    label = max(len(line.split("│")[1]) for line in text.splitlines() if line.startswith("│"))
    assert all(len(line) <= max(SUMMARY_WIDTH, label + longest_word + 7) for line in text.splitlines()), text
    if kinds:
        shown = flat(text)
        assert all(f"{' '.join(k.split())} {v}" in shown for k, v in kinds.items())


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--preset", "strict"], "--preset: must be one of default, support-bot, knowledge-base"),
        (["--mode", "fast"], "--mode: must be 'nli', 'cascade' or 'llm' (not 'fast')"),
        (["--concurrency", "0"], "--concurrency: must be greater than or equal to 1 (not 0)"),
        (["--price", "1"], "'1': two numbers IN,OUT"),
    ],
)
def test_a_bad_option_is_said_in_plain_words_naming_it(tmp_path: Path, options: list[str], said: str) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "contexts": ["c"], "answer": "a"}])
    result = runner.invoke(app, ["score", str(data), "--out", str(tmp_path / "o.jsonl"), *options])
    assert result.exit_code == 2, result.output
    text = flat(result.output)
    assert said in text, text
    assert "Value error" not in text and "Input should" not in text and "config:" not in text


def test_a_config_file_error_names_the_file(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "contexts": ["c"], "answer": "a"}])
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"preset": "strict"}))
    result = runner.invoke(app, ["score", str(data), "--out", str(tmp_path / "o.jsonl"), "--config", str(config)])
    assert result.exit_code == 2
    assert "preset: must be one of default, support-bot" in flat(result.output)
    assert f"(with the config file {config})" in flat(result.output)


@pytest.mark.parametrize(
    ("in_file", "options", "said", "not_said"),
    [
        (
            {"preset": "default"},
            ["--batch-api", "--cache-mode", "only"],
            "(given here: --batch-api, --cache-mode)",
            "config file",
        ),
        (
            {"batch_api": True},
            ["--cache-mode", "only"],
            "(given here: --cache-mode; with the config file CFG)",
            "--batch-api",
        ),
        ({"preset": "default"}, ["--preset", "strict"], "--preset: must be one of default", "config file"),
        (None, ["--batch-api", "--cache-mode", "only"], "(given here: --batch-api, --cache-mode)", "config file"),
        # a rule of one field whose message names another's name as a word: the weights' key qa is not --qa
        (
            {"weights": {"claims": 0, "nli": 0, "qa": 0}},
            ["--no-qa"],
            "weights: at least one of claims, nli, qa must be above 0 (else no answer has a score) (with the config "
            "file CFG)",
            "given here",
        ),
    ],
)
def test_a_refused_setting_names_where_it_came_from(
    tmp_path: Path, in_file: dict[str, Any] | None, options: list[str], said: str, not_said: str
) -> None:
    """`score --batch-api --cache-mode only --config FILE` was refused "(with the config file FILE)" though both
    settings came from the command line and the file set neither."""
    data = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "contexts": ["c"], "answer": "a"}])
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(in_file))
    args = ["score", str(data), "--out", str(tmp_path / "o.jsonl"), *options]
    result = runner.invoke(app, args if in_file is None else [*args, "--config", str(config)])
    assert result.exit_code == 2, result.output
    text = flat(result.output)
    assert said.replace("CFG", str(config)) in text and not_said not in text, text


def test_cache_stats_of_a_fresh_directory_counts_no_lookups(tmp_path: Path) -> None:
    # the counts are kept in the directory (every run's lookups: tests/test_cache_counts.py), not this process's
    result = runner.invoke(app, ["cache", "stats", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["hits"] == {} and stats["misses"] == {}
    assert {"directory", "entries", "total_entries", "bytes"} <= set(stats)


def test_a_library_error_in_any_command_is_exit_2_with_its_message() -> None:
    """One place maps errors to exit codes: a GroundjudgeError out of a command is 'error: ...' and exit 2."""
    from groundjudge.cli.command import Command
    from groundjudge.errors import InputError

    one = typer.Typer()

    @one.command(cls=Command)
    def boom() -> None:
        raise InputError("the rows are [bad]")

    result = CliRunner().invoke(one, [])
    assert result.exit_code == 2 and "error: the rows are [bad]" in result.output, result.output


def test_tune_says_no_head_stored_once(tmp_path: Path, tiny: Path) -> None:
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "[bold]tuned"  # a path is text, not console markup: "wrote" named it without "[bold]"
    args = [str(data), "--base", str(tiny), "--out", str(out), "--epochs", "1", "--batch-size", "4"]
    args += ["--max-length", "64", "--device", "cpu", "--no-progress", "--cache-dir", str(tmp_path / "c")]
    result = runner.invoke(app, ["tune", *args])
    assert result.exit_code == 0, result.output
    assert len(re.findall("no verdict head stored", result.stderr)) == 1, result.stderr
    assert f"wrote {out} with" in flat(result.stderr)
    # too few held-out claims for thresholds: the next step is said, not left to the manual
    assert f"calibrate judged.jsonl --nli-model {out} --target 0.9 --save-to-model" in flat(result.stderr)


@pytest.mark.parametrize(
    ("command", "option", "value", "said"),
    [
        ("calibrate", "--target", "nan", "error: --target nan: a precision in (0, 1]"),
        ("calibrate", "--target", "inf", "error: --target inf: a precision in (0, 1]"),
        ("calibrate", "--target", "1.5", "error: --target 1.5: a precision in (0, 1]"),
        ("calibrate", "--target", "0", "error: --target 0.0: a precision in (0, 1]"),
        ("calibrate", "--target", "-1", "error: --target -1.0: a precision in (0, 1]"),
        ("calibrate", "--min-decided", "0", "greater than or equal to 1"),
        ("calibrate", "--min-decided", "-5", "greater than or equal to 1"),
        ("tune", "--target", "nan", "error: --target nan: a precision in (0, 1]"),
        ("tune", "--target", "1.01", "error: --target 1.01: a precision in (0, 1]"),
    ],
)
def test_a_precision_target_outside_0_1_is_refused_before_any_work(
    tmp_path: Path, command: str, option: str, value: str, said: str
) -> None:
    """--target nan wrote NaN into the config (invalid JSON) and stopped --save-to-model with a traceback; 1.5, 0
    and -1 were fitted as if they meant something; --min-decided 0 let a cut-off rest on no claim."""
    rows = write_jsonl(tmp_path / "labelled.jsonl", gold_rows())
    more = ["--base", "x", "--out", str(tmp_path / "t")] if command == "tune" else ["--out", str(tmp_path / "c.json")]
    result = runner.invoke(app, [command, str(rows), *more, option, value])
    assert result.exit_code == 2, result.output
    assert said in flat(result.output), result.output
    assert not (tmp_path / "c.json").exists() and not (tmp_path / "t").exists()


@pytest.mark.parametrize("command", ["score", "calibrate", "calibrate --reliability", "report --html", "export"])
def test_an_output_in_a_missing_folder_is_refused_before_any_work(tmp_path: Path, command: str) -> None:
    """An OUT in a folder that does not exist was a FileNotFoundError traceback, after calibrate had scored every
    claim; a folder where a file goes was another."""
    rows = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "contexts": ["c"], "answer": "a"}])
    missing, folder = tmp_path / "no" / "out.jsonl", tmp_path
    for out in (missing, folder):
        args = {
            "score": ["score", str(rows), "--out", str(out)],
            "calibrate": ["calibrate", str(rows), "--out", str(out)],
            "calibrate --reliability": ["calibrate", str(rows), "--reliability", str(out)],
            "report --html": ["report", str(rows), "--html", str(out)],
            "export": ["review", "export", "--db", f"sqlite:///{tmp_path / 'r.db'}", "--out", str(out)],
        }[command]
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        text = flat(result.output)
        flag = "--html" if command.startswith("report") else "--reliability" if "reliab" in command else "--out"
        why = f"there is no folder {missing.parent} (create it first)" if out == missing else "that is a folder"
        assert f"error: {flag} {out}: {why}" in result.output and "Traceback" not in text, result.output
    assert not missing.parent.exists()


def test_a_file_the_system_refuses_in_any_command_is_exit_2_naming_the_path() -> None:
    """One place maps errors to exit codes: an OSError about a path (a folder that vanished mid-run, a file not
    writable) is 'error: PATH: why' and exit 2, not a traceback; one about no path stays a defect."""
    import errno

    from groundjudge.cli.command import Command

    one = typer.Typer()

    @one.command(cls=Command)
    def boom(kind: str) -> None:
        if kind == "path":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/gone/[red]out.jsonl")
        if kind == "handles":  # a path's error, but not about the path: the process ran out of file handles
            raise OSError(errno.EMFILE, "Too many open files", "/data/rows.jsonl")
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    result = CliRunner().invoke(one, ["path"])
    assert result.exit_code == 2 and "error: /gone/[red]out.jsonl: No such file or directory" in result.output
    other = CliRunner().invoke(one, ["socket"])
    assert isinstance(other.exception, ConnectionResetError)
    handles = CliRunner().invoke(one, ["handles"])  # a defect to report, not the user's mistake: not exit 2
    assert isinstance(handles.exception, OSError) and handles.exception.errno == errno.EMFILE


def test_calibrate_with_a_head_on_claims_of_one_text_writes_valid_json_and_no_head(tmp_path: Path, tiny: Path) -> None:
    """Sixty rows of one claim text: the head's claim-disjoint folds left one fold empty, its out-of-fold numbers
    were NaN, --out was invalid JSON and --save-to-model raised after storing new thresholds beside the old head.
    Now: no head (said why), a config JSON reads, and the model folder is stored whole."""
    import shutil

    from groundjudge.checker.profile import MODEL_PROFILE_FILE, read_model_head

    rows = [
        {
            "id": f"r{i}",
            "contexts": [f"Report {i}: the bridge opened in {1990 + (i % 2)}."],
            "claim": "The bridge opened in 1990.",
            "label": "SUPPORTED" if i % 2 == 0 else "CONTRADICTED",
        }
        for i in range(60)
    ]
    data = write_jsonl(tmp_path / "one.jsonl", rows)
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    out = tmp_path / "cfg.json"
    args = [str(data), "--nli-model", str(model), "--cache-dir", str(tmp_path / "c"), "--min-decided", "2"]
    result = runner.invoke(app, ["calibrate", *args, "--out", str(out), "--save-to-model"])
    assert result.exit_code == 0, result.output
    assert "no verdict head: a verdict head is measured on claims it never saw" in flat(result.stderr)
    assert "at least 2 different texts; these 60 claims have 1" in flat(result.stderr)
    config = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the config"))
    assert config["use_head"] is False and "head" not in config
    stored = json.loads((model / MODEL_PROFILE_FILE).read_text(), parse_constant=lambda c: pytest.fail(c))
    assert "cascade" in stored["thresholds"] and read_model_head(model) is None


def test_a_file_the_system_refuses_is_named_as_given_not_as_the_temporary_file(tmp_path: Path, tiny: Path) -> None:
    """A config is written through a temporary file beside it: where the system refused that one (a folder not
    writable, or a name of 240-255 characters, legal alone and too long with '.<12 hex>.tmp'), the error named
    'cfg.json.9a6476f11b1f.tmp', a file the user never gave."""
    rows = write_jsonl(tmp_path / "labelled.jsonl", gold_rows())
    out = tmp_path / ("c" * 245 + ".json")
    args = [str(rows), "--nli-model", str(tiny), "--cache-dir", str(tmp_path / "c"), "--no-head", "--min-decided", "2"]
    result = runner.invoke(app, ["calibrate", *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    said = flat(result.stderr)
    assert f"error: {out}: " in said and ".tmp" not in said, said
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".json"] == []


@pytest.mark.parametrize("command", ["calibrate", "calibrate --reviews", "report --html", "compare --html"])
def test_a_file_to_write_that_is_an_input_is_refused_before_any_work(tmp_path: Path, command: str) -> None:
    """'calibrate scored.jsonl -o scored.jsonl' replaced a scored run (its judge calls paid) with a six-line config,
    and 'report scored.jsonl --html scored.jsonl' with a page; by another path to it or a link, the same."""
    data = write_jsonl(tmp_path / "in.jsonl", gold_rows())
    other = write_jsonl(tmp_path / "other.jsonl", gold_rows())
    link = tmp_path / "link.jsonl"
    link.symlink_to(data)
    before = data.read_text()
    for out in (data, tmp_path / "." / "in.jsonl", link):
        args = {
            "calibrate": ["calibrate", str(data), "--out", str(out)],
            "calibrate --reviews": ["calibrate", str(other), "--reviews", str(data), "-o", str(out)],
            "report --html": ["report", str(data), "--html", str(out)],
            "compare --html": ["compare", str(data), str(data), "--html", str(out)],
        }[command]
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        flag = "--html" if "--html" in command else "--out"
        assert f"error: {flag} {out}: that is the input" in flat(result.output), result.output
        assert data.read_text() == before


def test_compare_html_in_a_missing_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    """compare --html is a file to write as report --html is: a missing folder was found after both runs were read
    and compared."""
    rows = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "contexts": ["c"], "answer": "a"}])
    for out, why in ((tmp_path / "no" / "c.html", f"there is no folder {tmp_path / 'no'}"), (tmp_path, "a folder")):
        result = runner.invoke(app, ["compare", str(rows), str(rows), "--html", str(out)])
        assert result.exit_code == 2, result.output
        assert f"error: --html {out}: " in flat(result.output) and why in flat(result.output), result.output


def test_review_export_into_the_review_database_itself_is_refused(tmp_path: Path) -> None:
    """'review export --db sqlite:///r.db --out r.db' emptied the team's review database (every reviewer, every
    decision) and said 'wrote r.db (0 decisions)', exit 0."""
    import sqlite3

    db = tmp_path / "r.db"
    made = runner.invoke(app, ["review", "add-reviewer", "alice", "--db", f"sqlite:///{db}"])
    assert made.exit_code == 0, made.output
    for url in (f"sqlite:///{db}", str(db)):
        result = runner.invoke(app, ["review", "export", "--db", url, "--out", str(db)])
        assert result.exit_code == 2, result.output
        assert f"error: --out {db}: that is the input" in flat(result.output), result.output
        with sqlite3.connect(db) as kept:  # the reviewer is still there
            assert kept.execute("SELECT name FROM gj_reviewers").fetchall() == [("alice",)]


def test_tune_refuses_an_out_that_holds_its_base_model(tmp_path: Path, tiny: Path) -> None:
    """'tune --base M --out M' was refused with 'or pass --overwrite'; with --overwrite, OUT (a folder with a
    config.json: "ours") was emptied, the base model with it, and the run then stopped with a traceback: the base
    model gone and nothing tuned. A folder above the base went the same way."""
    import shutil

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    base = tmp_path / "models" / "base"
    shutil.copytree(tiny, base)
    files = sorted(p.name for p in base.iterdir())
    for out in (base, tmp_path / "models", tmp_path / "models" / "." / "base"):
        args = [str(data), "--base", str(base), "--out", str(out), "--epochs", "1", "--overwrite", "--no-progress"]
        result = runner.invoke(app, ["tune", *args, "--device", "cpu", "--cache-dir", str(tmp_path / "c")])
        assert result.exit_code == 2, result.output
        assert f"--out {out} holds the base model" in flat(result.output), result.output
        assert sorted(p.name for p in base.iterdir()) == files


def test_a_report_with_a_score_that_is_not_a_number_is_refused_naming_its_line(tmp_path: Path, tiny: Path) -> None:
    """A 'score' OUT edited by hand (or written by a broken model) with NaN scores was read as it stood: NaN passes
    no comparison, so those claims went to every side of every cut-off, and 30 such rows moved calibrate's cut-offs
    on the other 170. A score must be a finite number; the line and field are named."""
    rows = write_jsonl(tmp_path / "labelled.jsonl", gold_rows())
    out = tmp_path / "scored.jsonl"
    scored = runner.invoke(
        app, ["score", str(rows), "--out", str(out), "--mode", "nli", "--nli-model", str(tiny), "--no-progress"]
    )
    assert scored.exit_code == 0, scored.output
    lines = out.read_text().splitlines()
    report = json.loads(lines[2])
    report["claims"][0]["nli"]["entailment"] = float("nan")
    lines[2] = json.dumps(report)  # NaN, as json.dumps writes it by default
    out.write_text("\n".join(lines) + "\n")
    for command in (["calibrate", str(out), "--no-head"], ["report", str(out)]):
        result = runner.invoke(app, [*command, "--nli-model", str(tiny)] if command[0] == "calibrate" else command)
        assert result.exit_code == 2, result.output
        said = flat(result.output)
        assert "line 3" in said and "claims.0.nli.entailment" in said and "finite number" in said, said


def test_an_interrupted_tune_names_its_checkpoint_as_its_path_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in tune printed the checkpoint folder as console markup: '[bold]' in --out was swallowed and a folder
    '[/red]' raised a MarkupError instead of the exit 130 that tells a script it was interrupted. And it said
    "checkpoint kept" before tune had kept anything, or named another run's leftover .tune: it names the folder only
    when this run's state is in it (tune says so: TuneInterrupted)."""
    import groundjudge.cli.learn as learn
    from groundjudge.learn.tune_out import TuneInterrupted

    def interrupted(*args: Any, **kwargs: Any) -> None:
        out = Path(args[2])
        (out / ".tune").mkdir(parents=True)  # this run's state, or another run's that this one never reached
        (out / ".tune" / "pairs.json").write_text("[]")
        if "state" in out.name:  # interrupted once tune had kept its pairs
            raise TuneInterrupted(out / ".tune")
        raise KeyboardInterrupt

    monkeypatch.setattr(learn, "tune", interrupted)  # the user's Ctrl-C, wherever tune was
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    for out in (tmp_path / "[bold]tuned", tmp_path / "d[" / "red]tuned", tmp_path / "[i]state"):
        result = runner.invoke(app, ["tune", str(data), "--base", "m", "--out", str(out), "--no-progress"])
        assert result.exit_code == 130, result.output
        said = flat(result.stderr)
        if "state" in out.name:
            assert f"what was done is kept in {out / '.tune'}; rerun the same command to resume" in said, said
        else:
            assert "before tune kept anything of this run; rerun the same command to start again" in said, said
            assert ".tune" not in said


def test_tune_overwrite_never_empties_a_folder_holding_its_data_or_only_a_config(tmp_path: Path, tiny: Path) -> None:
    """'tune d/train.jsonl --out d --overwrite' with a config.json in d (calibrate's, or a project's) emptied d: the
    training data, the config and every other file of the user's went, then the run said 'no file d/train.jsonl'."""
    folder = tmp_path / "d"
    folder.mkdir()
    data = write_jsonl(folder / "train.jsonl", gold_rows())
    (folder / "config.json").write_text('{"t_support": 0.8}')
    (folder / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    base = ["--base", str(tiny), "--epochs", "1", "--batch-size", "4", "--max-length", "64", "--no-progress"]
    result = runner.invoke(app, ["tune", str(data), "--out", str(folder), "--overwrite", *base])
    assert result.exit_code == 2, result.output
    assert f"--out {folder} holds the data" in flat(result.output), result.output
    other = write_jsonl(tmp_path / "gold.jsonl", gold_rows())  # the data elsewhere: a config.json alone is no tune's
    result = runner.invoke(app, ["tune", str(other), "--out", str(folder), "--overwrite", *base])
    assert result.exit_code == 2 and "refusing to empty it" in flat(result.output), result.output
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_score_out_that_is_its_config_or_its_parquet_input_is_refused(tmp_path: Path) -> None:
    """'score in.jsonl --config c.json -o c.json --overwrite' replaced the config with reports, and 'score
    in.parquet -o in.parquet --overwrite' the input table (the check of OUT against the input saw in.parquet.jsonl)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": "a", "contexts": ["Paris is in France."], "answer": "Paris is in France."}]
    data = write_jsonl(tmp_path / "in.jsonl", rows)
    config = tmp_path / "c.json"
    config.write_text('{"preset": "default"}')
    table = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{**rows[0], "id": "b"}]), table)
    saved = table.read_bytes()
    for args, kept in (
        ([str(data), "--config", str(config), "--out", str(config)], config),
        ([str(table), "--out", str(table)], table),
    ):
        before = kept.read_bytes()
        result = runner.invoke(app, ["score", *args, "--overwrite", "--mode", "nli", "--no-progress"])
        assert result.exit_code == 2, result.output
        assert f"error: --out {kept}: that is the input" in flat(result.output), result.output
        assert kept.read_bytes() == before
    assert table.read_bytes() == saved


def test_ctrl_c_leaves_a_parquet_out_as_it_was(tmp_path: Path, tiny: Path) -> None:
    """Ctrl-C on 'score -o run.parquet --overwrite' wrote the rows finished so far over the earlier run's table and
    said 'wrote run.parquet (N reports ...)': a part of a run under the name of a finished one, nothing said of the
    stop. A real process and a real SIGINT."""
    import os
    import signal
    import subprocess
    import sys
    import time

    rows = [{"id": "r", "contexts": ["Paris is the capital of France."], "answer": "Paris is in France."}]
    data = write_jsonl(tmp_path / "in.jsonl", [{**rows[0], "id": f"r{i}"} for i in range(40000)])
    out = tmp_path / "run.parquet"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    args = [sys.executable, "-m", "groundjudge", "score", str(data), "-o", str(out), "--mode", "nli"]
    args += ["--nli-model", str(tiny), "--no-progress", "--cache-mode", "off", "--overwrite"]
    first = write_jsonl(tmp_path / "first.jsonl", rows[:1])  # the earlier run, in this process (no new torch)
    earlier = runner.invoke(app, [args[3], str(first), *args[5:]])
    assert earlier.exit_code == 0, earlier.output
    saved = out.read_bytes()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jsonl = tmp_path / "run.parquet.jsonl"
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if jsonl.exists() and jsonl.read_bytes().count(b"\n") > 20:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert out.read_bytes() == saved
    assert "interrupted:" in flat(stderr) and "re-run with --resume" in flat(stderr), stderr


def _parquet_out_without_jsonl(tmp_path: Path, tiny: Path) -> tuple[list[str], Path, str]:
    """A Parquet OUT of rows r0 and r1 whose JSONL is gone, and b.jsonl: r0 to r2 with other answers (a row scored
    again would show its new one). Returns the score options, the JSONL's path and what it held."""
    rows = [
        {"id": f"r{i}", "contexts": ["Paris is the capital of France."], "answer": "Paris is in France."}
        for i in range(3)
    ]
    args = ["-o", str(tmp_path / "run.parquet"), "--mode", "nli", "--nli-model", str(tiny), "--no-progress"]
    args += ["--cache-mode", "off"]
    first = runner.invoke(app, ["score", str(write_jsonl(tmp_path / "a.jsonl", rows[:2])), *args])
    assert first.exit_code == 0, first.output
    jsonl = tmp_path / "run.parquet.jsonl"
    before = jsonl.read_text(encoding="utf-8")
    jsonl.unlink()
    write_jsonl(tmp_path / "b.jsonl", [{**r, "answer": "Paris is in Spain."} for r in rows])
    return args, jsonl, before


def test_resume_of_a_parquet_out_whose_jsonl_is_gone_keeps_its_reports(tmp_path: Path, tiny: Path) -> None:
    """'score -o run.parquet' with run.parquet there and run.parquet.jsonl gone (deleted as a temporary file, or only
    the table copied) says 'pass --resume to continue it'; the resume read the missing JSONL as an empty OUT, scored
    every row again (an LLM run paid again) and wrote the table over the reports it held. The JSONL is written again
    from the table's report column first, and the resume scores only the rows the table has no report for."""
    args, jsonl, before = _parquet_out_without_jsonl(tmp_path, tiny)
    again = runner.invoke(app, ["score", str(tmp_path / "b.jsonl"), *args, "--resume"])
    assert again.exit_code == 0, again.output
    assert "restored from" in flat(again.output), again.output
    reports = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert jsonl.read_text(encoding="utf-8").startswith(before)
    assert [(r["id"], r["answer"]) for r in reports] == [
        ("r0", "Paris is in France."),
        ("r1", "Paris is in France."),
        ("r2", "Paris is in Spain."),
    ]
    assert [r.id for r in read_reports(tmp_path / "run.parquet")] == ["r0", "r1", "r2"]


def test_a_dry_run_resume_of_a_parquet_out_whose_jsonl_is_gone_counts_only_the_rows_it_lacks(
    tmp_path: Path, tiny: Path
) -> None:
    """'score --dry-run --resume' read the missing JSONL as an empty OUT and counted every row as still to score,
    where the resume itself (its JSONL restored from the table first) scores only the row the table lacks."""
    args, jsonl, _ = _parquet_out_without_jsonl(tmp_path, tiny)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    dry = runner.invoke(app, ["score", str(tmp_path / "b.jsonl"), *args, "--resume", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["rows"] == 1, dry.stdout  # r2 only, as the resume below
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files and not jsonl.exists()  # nothing written
    again = runner.invoke(app, ["score", str(tmp_path / "b.jsonl"), *args, "--resume", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.splitlines()[-1])["n"] == 1  # the run scored r2 alone


def test_calibrate_reliability_at_the_config_path_is_refused(tmp_path: Path) -> None:
    """'calibrate -o fit.html --reliability fit.html' wrote the diagram, then the config over it, and said it
    wrote both."""
    data = write_jsonl(tmp_path / "in.jsonl", gold_rows())
    out = tmp_path / "fit.html"
    result = runner.invoke(app, ["calibrate", str(data), "-o", str(out), "--reliability", str(out), "--no-head"])
    assert result.exit_code == 2, result.output
    assert f"error: --reliability {out}: that is --out" in flat(result.output), result.output
    assert not out.exists()


def test_thresholds_calibrated_on_one_model_are_refused_beside_another(tmp_path: Path, tiny: Path) -> None:
    """A config of raw thresholds from 'calibrate --no-head' said nothing of the model they were fitted on, so
    'score --config fit.json --nli-model tuned/' decided claims with the base model's cut-offs on the tuned model's
    entailment (another scale): the precision calibrate promised no longer held, and nothing said so. A head in the
    same place is refused; the thresholds now are too."""
    rows = write_jsonl(tmp_path / "labelled.jsonl", gold_rows())
    config = tmp_path / "fit.json"
    args = [str(rows), "--nli-model", str(tiny), "--cache-dir", str(tmp_path / "c"), "--no-head"]
    result = runner.invoke(app, ["calibrate", *args, "--min-decided", "2", "--target", "0.5", "-o", str(config)])
    assert result.exit_code == 0, result.output
    written = json.loads(config.read_text())
    cuts = [written[k] for k in ("t_support", "t_contradict", "t_unsupported") if written[k] not in (None, "never")]
    assert written["thresholds_model"] and cuts, written
    claims = write_jsonl(
        tmp_path / "claims.jsonl", [{k: r[k] for k in ("id", "contexts", "claim")} for r in gold_rows(2)]
    )
    base = ["score", str(claims), "--config", str(config), "--mode", "nli", "--no-progress", "--cache-mode", "off"]
    other = runner.invoke(app, [*base, "-o", str(tmp_path / "other.jsonl"), "--nli-model", str(SHARED_MODEL)])
    assert other.exit_code == 2, other.output
    said = flat(other.output)
    assert f"were fitted on the scores of NLI model {written['thresholds_model']}" in said, said
    assert not (tmp_path / "other.jsonl").exists()
    # a cut-off given by hand (Config.load's overrides) is the user's, not the fitted one the config names
    from groundjudge.config import Config

    levels = [k for k in ("t_support", "t_contradict", "t_unsupported") if written[k] not in (None, "never")]
    by_hand = Config.load(config, t_unsupported=0.1)  # the others fitted still name their model
    assert by_hand.fitted_thresholds() == [k for k in levels if k != "t_unsupported"]
    assert (by_hand.thresholds_model is None) == (levels in (["t_unsupported"], []))
    assert Config.load(config, nli_model=str(SHARED_MODEL)).thresholds_model == written["thresholds_model"]
    same = runner.invoke(app, [*base, "-o", str(tmp_path / "same.jsonl"), "--nli-model", str(tiny)])
    assert same.exit_code in (0, 1), same.output  # the model the thresholds were fitted on runs them
    assert len(list(read_reports(tmp_path / "same.jsonl"))) == 2


def test_a_config_that_says_which_thresholds_were_fitted_is_held_to_them_by_score(tmp_path: Path, tiny: Path) -> None:
    """A config from Config.load(fit.json, t_support=0.6) written back out names the thresholds thresholds_model
    covers (thresholds_fitted): 'score --config' beside another model refuses those, naming only them, and runs
    on the model they were fitted on; a thresholds_fitted with no model to name is refused naming the field."""
    claims = write_jsonl(
        tmp_path / "claims.jsonl", [{k: r[k] for k in ("id", "contexts", "claim")} for r in gold_rows(2)]
    )
    from groundjudge.config import Config
    from groundjudge.pipeline import Evaluator

    fitted_on = Evaluator(Config(nli_model=str(tiny), use_head=False, mode="nli")).nli.identity
    fit = {"t_support": 0.7, "t_contradict": 0.9, "t_unsupported": 0.2, "use_head": False}
    (tmp_path / "fit.json").write_text(json.dumps({**fit, "thresholds_model": fitted_on}))
    mixed = Config.load(tmp_path / "fit.json", t_support=0.6)
    config = tmp_path / "mixed.json"
    config.write_text(json.dumps(mixed.model_dump(exclude_unset=True)))
    assert json.loads(config.read_text())["thresholds_fitted"] == ["t_contradict", "t_unsupported"]
    base = ["score", str(claims), "--config", str(config), "--mode", "nli", "--no-progress", "--cache-mode", "off"]
    other = runner.invoke(app, [*base, "-o", str(tmp_path / "other.jsonl"), "--nli-model", str(SHARED_MODEL)])
    assert other.exit_code == 2, other.output
    said = flat(other.output)
    assert f"t_contradict and t_unsupported were fitted on the scores of NLI model {fitted_on}" in said, said
    assert not (tmp_path / "other.jsonl").exists()
    same = runner.invoke(app, [*base, "-o", str(tmp_path / "same.jsonl"), "--nli-model", str(tiny)])
    assert same.exit_code in (0, 1), same.output
    assert len(list(read_reports(tmp_path / "same.jsonl"))) == 2
    orphan = tmp_path / "orphan.json"
    orphan.write_text(json.dumps({**fit, "thresholds_fitted": ["t_support"]}))
    bad = runner.invoke(app, ["score", str(claims), "--config", str(orphan), "-o", str(tmp_path / "bad.jsonl")])
    assert bad.exit_code == 2, bad.output
    assert "thresholds_fitted names the thresholds thresholds_model covers" in flat(bad.output), bad.output
    assert str(orphan).replace(" ", "") in flat(bad.output).replace(" ", ""), bad.output  # a TMPDIR may hold spaces


def test_calibrate_says_when_what_it_stores_decides_nothing_locally(tmp_path: Path, tiny: Path) -> None:
    """A config whose thresholds decide no claim (no cut-off kept the target) sends every claim to the judge: the
    manual's 'the next run escalates less' does not hold, and calibrate printed only '100.0%' in a number."""
    rows = write_jsonl(tmp_path / "labelled.jsonl", gold_rows())
    args = ["calibrate", str(rows), "--nli-model", str(tiny), "--cache-dir", str(tmp_path / "c"), "--no-head"]
    result = runner.invoke(app, [*args, "--target", "1.0", "--min-decided", "16"])
    assert result.exit_code == 0, result.output
    assert "decides nothing locally: no cut-off kept a local precision of 1 on these 16" in flat(result.stderr)
    args[3] = str(SHARED_MODEL)
    result = runner.invoke(app, [*args, "--target", "0.5", "--min-decided", "2"])
    assert result.exit_code == 0, result.output
    fit = json.loads(next(x for x in result.stdout.splitlines() if x.startswith("{")))
    assert (fit["t_support"], fit["t_unsupported"]) != (None, None) and "decides nothing" not in flat(result.stderr)


def test_calibrate_does_not_say_nothing_is_decided_when_contradictions_are(capsys: pytest.CaptureFixture[str]) -> None:
    """Cut-offs that call CONTRADICTED locally (t_contradict alone: the entailment told nothing apart) decide those
    claims in the cascade: calibrate said "decides nothing locally ... sends every claim to the judge" after its own
    line "NLI decides 77 of 80 claims locally" (80 Factcheck-GPT claims; the cascade then decided them all)."""
    from groundjudge.cli.learn import _say_if_nothing_decided
    from groundjudge.learn.calibrate import fit_thresholds

    fit = fit_thresholds([0.4] * 40, [0.5] * 20 + [0.9] * 20, [True] * 20 + [False] * 20, target=0.9)
    assert (fit.t_support, fit.t_unsupported) == (None, None) and fit.t_contradict is not None and fit.decided
    _say_if_nothing_decided(fit, None, 0.9)
    assert "decides nothing" not in capsys.readouterr().err
    none = fit_thresholds([0.4] * 40, [0.5] * 40, [True] * 20 + [False] * 20, target=0.9)
    assert none.local.t_contradict is None and not none.decided
    _say_if_nothing_decided(none, None, 0.9)
    assert "decides nothing locally" in capsys.readouterr().err


def test_address_without_the_ray_engine_is_refused(tmp_path: Path) -> None:
    """'score --address ray://HEAD:10001' without --engine ray scored every row on this machine, silently, exit 0."""
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": ["It is red."], "answer": "It is red."}) + "\n")
    out = tmp_path / "o.jsonl"
    result = CliRunner().invoke(app, ["score", str(data), "-o", str(out), "--address", "ray://head:10001"])
    assert result.exit_code == 2 and "--address ray://head:10001: goes with --engine ray" in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"id": "a", "answer": "x", "contexts": ["y"]}, "an input row (no verdict and claims), not a report"),
        ({"id": "a", "claim_id": "c1", "claim": "x", "label": "SUPPORTED"}, "a review (a claim's decision)"),
    ],
)
def test_a_command_that_reads_reports_says_when_it_was_given_an_input_or_a_review_file(
    tmp_path: Path, row: dict[str, Any], words: str
) -> None:
    """report, compare and metrics given the input file (or the reviews) instead of what score wrote printed
    pydantic's list of every missing field of a report; they now say what the line is and which file to give."""
    given = write_jsonl(tmp_path / "rows.jsonl", [row])
    for args in (["report", str(given)], ["compare", str(given), str(given)], ["metrics", str(given)]):
        result = runner.invoke(app, args)
        said = flat(result.output)
        assert result.exit_code == 2, result.output
        assert f"line 1: {words}" in said and "give the file 'groundjudge score' wrote" in said, said
        assert "Field required" not in said, said


def test_an_explicit_qa_in_nli_mode_says_it_runs_none(tmp_path: Path, tiny: Path) -> None:
    """``score --qa`` without an LLM ran nli mode with no QA check and no word of it: the flag was taken and
    ignored. It now says so; without --qa (the default is on) nothing is said."""
    rows = write_jsonl(tmp_path / "rows.jsonl", gold_rows())
    base = ["score", str(rows), "--nli-model", str(tiny), "--no-progress"]
    asked = runner.invoke(app, [*base, "--out", str(tmp_path / "a.jsonl"), "--qa"])
    assert asked.exit_code == 0, asked.output
    assert "--qa: the QA check asks an LLM (--llm); nli mode runs none" in flat(asked.stderr)
    plain = runner.invoke(app, [*base, "--out", str(tmp_path / "b.jsonl")])
    assert plain.exit_code == 0 and "QA check" not in plain.stderr, plain.output
