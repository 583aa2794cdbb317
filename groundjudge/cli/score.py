"""``groundjudge score``: options -> Config -> the input checks and one engine call (:mod:`groundjudge.runs`: the
local engine or Ray, one contract); ``--dry-run``; a run's stop -> its message and exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from groundjudge.cli.common import (
    EXIT_BUDGET,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_ROWS_FAILED,
    EXIT_USAGE,
    cost_cell,
    err,
    fail,
    limits_cell,
    print_json,
    print_summary,
    progress_bar,
)
from groundjudge.cli.notes import local_model_note, model_parameters
from groundjudge.cli.options import (
    COST,
    INPUT_OUTPUT,
    LLM,
    LOCAL,
    RUN,
    cache_dir_option,
    config_from_options,
    default,
    device_problem,
    file_to_write,
    given,
    json_option,
    nli_model_option,
    not_an_input,
    overwrite_option,
    parse_price,
    progress_option,
    setting,
)
from groundjudge.errors import BatchPendingError, BudgetExceededError, CacheMissError, GroundjudgeError, InputError

if TYPE_CHECKING:
    from groundjudge.pipeline import Evaluator
    from groundjudge.runs.out import RunResult

# --batch-api without --batch-size: rows evaluated together, so that each stage sends one provider batch.
_BATCH_API_ROWS = 5000


# score's own options (not Config fields), declared here so that its signature reads as a list of names
INPUT = typer.Argument(
    help="Rows {id, contexts, answer | claim, question?, label?, reference?}: .jsonl, .csv, .parquet or a folder of "
    "Parquet files; a path or a URI pyarrow reads (s3://...). RAGAS and DeepEval column names are recognised.",
    show_default=False,
)
OUT = typer.Option(
    "--out",
    "-o",
    help="Where the reports go, one JSON object a line; a .parquet OUT is written from OUT.jsonl (kept, for --resume) "
    "when the run reaches its last row.",
    rich_help_panel=INPUT_OUTPUT,
    callback=file_to_write,
)
MAP = typer.Option(
    "--map",
    help="Column mapping field=column,...: e.g. answer=response,contexts=retrieved_contexts (context=COLUMN: a cell "
    "may be one passage).",
    rich_help_panel=INPUT_OUTPUT,
)
CONFIG = typer.Option(
    help="JSON config (e.g. from 'groundjudge calibrate'); options given here override it.",
    rich_help_panel=INPUT_OUTPUT,
)
RESUME = typer.Option(
    help="Skip ids already in OUT and append; refused, before any call, when OUT's reports were made with other "
    "settings (mode, judge, NLI model, thresholds, preset, prompts: their versions). Exits 1 while OUT keeps an "
    "earlier run's failed reports (--retry-errors scores them again).",
    rich_help_panel=INPUT_OUTPUT,
)
RETRY_ERRORS = typer.Option(
    help="With --resume: score again the rows whose report in OUT failed, replacing it.", rich_help_panel=INPUT_OUTPUT
)
BATCH_API = setting(
    "batch_api",
    extra=f"rows go {_BATCH_API_ROWS} at a time unless --batch-size is given: one provider batch per stage for the "
    "whole input, not one per 32 rows, each awaited in turn",
    panel=LLM,
)
PRICE = setting("price", parser=parse_price, metavar="IN,OUT", extra="e.g. --price 0.5,1.5", panel=COST)
SECOND_JUDGE_PRICE = setting("second_judge_price", parser=parse_price, metavar="IN,OUT", panel=COST)
DRY_RUN = typer.Option(
    help="Say how many LLM calls the run needs (exact where the cache holds the claims and their NLI scores, else an "
    "upper bound), how many are cached (free) and the cost, and exit: JSON on stdout, the same in words on stderr; "
    "sends and writes nothing. With --resume: the rows OUT has no report for, refused as the resume would be.",
    rich_help_panel=COST,
)
BATCH_SIZE = typer.Option(
    help=f"Rows evaluated together (NLI batches across them); with --batch-api, unless given here, {_BATCH_API_ROWS} "
    "[default: 32].",
    min=1,
    rich_help_panel=RUN,
)
ENGINE = typer.Option(
    help="local, or ray: score on a Ray cluster (pip install 'groundjudge[ray]').", rich_help_panel=RUN
)
ADDRESS = typer.Option(
    help="With --engine ray: the cluster (ray://HOST:10001, auto) [default: $RAY_ADDRESS or local].",
    rich_help_panel=RUN,
)


def score_command(
    ctx: typer.Context,
    input: Annotated[str, INPUT],
    out: Annotated[Path, OUT],
    columns: Annotated[str | None, MAP] = None,
    citation_style: Annotated[str, setting("citation_style", panel=INPUT_OUTPUT)] = default("citation_style"),
    min_citation_precision: Annotated[float | None, setting("min_citation_precision", panel=INPUT_OUTPUT)] = None,
    config: Annotated[Path | None, CONFIG] = None,
    resume: Annotated[bool, RESUME] = False,
    retry_errors: Annotated[bool, RETRY_ERRORS] = False,
    overwrite: Annotated[bool, overwrite_option(INPUT_OUTPUT)] = False,
    as_json: Annotated[bool, json_option(INPUT_OUTPUT)] = False,
    # the settings: each parameter is named after its Config field (config_from_options reads them back)
    mode: Annotated[str | None, setting("mode", panel=LLM)] = None,
    llm: Annotated[str | None, setting("llm", panel=LLM)] = None,
    base_url: Annotated[str | None, setting("base_url", panel=LLM)] = None,
    reasoning_effort: Annotated[str | None, setting("reasoning_effort", panel=LLM)] = None,
    qa: Annotated[bool, setting("qa", "--qa/--no-qa", panel=LLM)] = default("qa"),
    second_judge: Annotated[str | None, setting("second_judge", metavar="PROVIDER/MODEL", panel=LLM)] = None,
    second_judge_base_url: Annotated[str | None, setting("second_judge_base_url", panel=LLM)] = None,
    second_judge_sample: Annotated[float | None, setting("second_judge_sample", panel=LLM)] = None,
    second_judge_reasoning_effort: Annotated[str | None, setting("second_judge_reasoning_effort", panel=LLM)] = None,
    batch_api: Annotated[bool, BATCH_API] = default("batch_api"),
    pack_answers: Annotated[int, setting("pack_answers", panel=COST)] = default("pack_answers"),
    nli_model: Annotated[str | None, nli_model_option(LOCAL)] = None,
    nli_kind: Annotated[str, setting("nli_kind", panel=LOCAL)] = default("nli_kind"),
    nli_supported_label: Annotated[int | None, setting("nli_supported_label", panel=LOCAL)] = None,
    nli_trust_remote_code: Annotated[bool, setting("nli_trust_remote_code", panel=LOCAL)] = False,
    nli_max_length: Annotated[int | None, setting("nli_max_length", panel=LOCAL)] = None,
    use_head: Annotated[bool, setting("use_head", "--head/--no-head", panel=LOCAL, show_default=False)] = True,
    preset: Annotated[str, setting("preset", panel=LOCAL)] = default("preset"),
    budget_usd: Annotated[float | None, setting("budget_usd", "--budget", extra="see --price", panel=COST)] = None,
    price: Annotated[dict[str, float] | None, PRICE] = None,
    second_judge_price: Annotated[dict[str, float] | None, SECOND_JUDGE_PRICE] = None,
    max_calls: Annotated[int | None, setting("max_calls", panel=COST)] = None,
    concurrency: Annotated[int, setting("concurrency", panel=COST)] = default("concurrency"),
    rpm: Annotated[float | None, setting("rpm", panel=COST)] = None,
    tpm: Annotated[float | None, setting("tpm", panel=COST)] = None,
    dry_run: Annotated[bool, DRY_RUN] = False,
    cache_dir: Annotated[Path | None, cache_dir_option(RUN)] = None,
    cache_mode: Annotated[str, setting("cache_mode", panel=RUN)] = default("cache_mode"),
    batch_size: Annotated[int | None, BATCH_SIZE] = None,
    engine: Annotated[str, ENGINE] = "local",
    address: Annotated[str | None, ADDRESS] = None,
    progress: Annotated[bool, progress_option(RUN)] = True,
) -> None:
    """Score answers against their sources; one report per input row, written as each finishes. The run's summary
    goes to stderr as a table; with --json also to stdout as one JSON object (RunSummary's keys)."""
    from groundjudge.io.made_with import MadeWith
    from groundjudge.io.tables import parse_mapping
    from groundjudge.runs import pending_rows, score_rows
    from groundjudge.runs.out import restore_from_parquet

    mapping = parse_mapping(columns)
    out, parquet_out = _out_files(input, out, config, replacing=resume or overwrite or dry_run)
    if resume and not dry_run and parquet_out is not None and (restored := restore_from_parquet(parquet_out, out)):
        err.print(escape(f"{out} restored from {parquet_out} ({restored} reports): the resume continues them"))
    # the run's input checks (no input file, --out is the input, --retry-errors without --resume, the format); a
    # dry run restores nothing: OUT's JSONL gone, it reads the Parquet's reports as the resume would restore them
    pending = pending_rows(
        input, out, columns=mapping, resume=resume, retry_errors=retry_errors, parquet_out=parquet_out
    )
    if out.exists() and out.stat().st_size and not (resume or overwrite or dry_run):
        raise fail(f"{out} exists: pass --resume to continue it or --overwrite to replace it")
    evaluator = _evaluator(ctx, config, out)
    cfg = evaluator.config

    if batch_size is None:  # one provider batch per stage, not one per 32 rows awaited in turn (up to a day each)
        batch_size = _BATCH_API_ROWS if cfg.batch_api else 32
    _check_engine(engine, address, batch_api=cfg.batch_api and not dry_run)
    _say_damaged(pending.existing.damaged, out)
    if dry_run:  # writes nothing, ever; a resume the run would refuse is refused here too, before any estimate
        pending.check_made_with(
            lambda: MadeWith.of(evaluator.mode, evaluator.versions()), lambda m: err.print(escape(m), highlight=False)
        )
        estimate = evaluator.estimate(row for _, row in pending.rows if not isinstance(row, InputError))
        if as_json:  # one line, as every --json
            print_json(estimate)
        else:
            typer.echo(json.dumps(estimate, indent=2))  # for scripts, on stdout; the sentence for people, on stderr
        err.print(escape(estimate["note"]), highlight=False)
        raise typer.Exit(EXIT_OK)

    console = Console(stderr=True, soft_wrap=True)
    on_ray = engine == "ray"
    _device_here(None if on_ray else cfg.device, config)  # a config file's device (on Ray: each worker's own)
    if on_ray:
        if cfg.resolved_mode == "nli":  # the model loads on the workers: its name only
            from groundjudge.checker.nli import resolve_model_name

            err.print(escape(local_model_note(resolve_model_name(cfg.nli_model))), highlight=False)
    else:
        nli = evaluator.nli  # load the model now: a bad --nli-model is a usage error; the rate excludes loading
        if evaluator.mode == "nli":  # no judge behind the local model: say which one decides, what to expect of it
            err.print(escape(local_model_note(nli.name, nli.kind, model_parameters(nli.model))), highlight=False)
    total = pending.total() if progress and not on_ray else None  # a cheap line count, no parsing
    code = EXIT_USAGE
    result: Any = None
    try:
        with progress_bar(console, progress) as bar:
            limiter = None if on_ray else getattr(evaluator.client, "limiter", None)
            calls = (lambda: limits_cell(limiter.stats())) if limiter is not None else None  # read live
            # on Ray the cost is the cluster's: in the summary, not on the bar
            cost = (lambda: "") if on_ray else (lambda: cost_cell(evaluator.usage))
            task = bar.add_task(
                "scoring on ray" if on_ray else "scoring", total=total, cost=cost(), cached=0, llm=calls
            )
            batch_task: list[Any] = []

            def on_batch(done: int, requests: int) -> None:
                if not batch_task:
                    batch_task.append(bar.add_task("provider batch", total=requests, cost="", cached=0))
                bar.update(batch_task[0], completed=done, total=requests, cost=cost())

            def on_report(_: Any) -> None:
                cached = 0 if on_ray else evaluator.usage.cached_calls
                bar.update(task, advance=1, cost=cost(), cached=cached)

            evaluator.batch_progress = on_batch
            # a GroundjudgeError raised before any row (input, config, cluster) is a usage error (cli.command)
            result = score_rows(
                pending,
                out,
                evaluator,
                engine=engine,
                fresh=overwrite and not resume,
                batch_size=batch_size,
                on_report=on_report,
                note=lambda m: err.print(escape(m), highlight=False),
                address=address,
            )
        code = _stop_code(result, out)
    except KeyboardInterrupt:  # a part of the run under the name of the whole: the Parquet OUT is left as it was
        if parquet_out is not None:
            _say_parquet_not_written(parquet_out, out)
        raise
    if parquet_out is not None and result.stopped is not None:  # a part of the run: Parquet only when it finishes
        err.print(escape(f"{parquet_out} not written: it is written once a run reaches its last row"))
    elif parquet_out is not None and out.exists():
        code = _write_parquet_out(out, parquet_out, code)
    print_summary(console, result.summary)
    for line in result.spent_lines():  # what the ledger billed that the rows above do not show
        err.print(escape(line), highlight=False)
    if as_json:
        spent = result.spent()
        print_json({**result.summary.model_dump(mode="json"), **({"spent": spent} if spent else {})})
    if _failures_kept(result.failures_kept, out) + result.summary.rows_failed and code == EXIT_OK:  # said anyway
        code = EXIT_ROWS_FAILED  # OUT as a whole is what a CI step reads: a failure kept in it never passes
    raise typer.Exit(code)


def _evaluator(ctx: typer.Context, config: Path | None, out: Path) -> Evaluator:
    """The run's evaluator: the options the user gave over the config file's values, a provider batch's state beside
    OUT (a rerun of the command resumes the batches); says when --qa was asked for and nli mode runs none."""
    from groundjudge.pipeline import Evaluator
    from groundjudge.runs.out import batch_state_path

    cfg = config_from_options(ctx, config)
    if cfg.batch_api and cfg.batch_state is None:
        cfg = config_from_options(ctx, config, batch_state=str(batch_state_path(out)))
    evaluator = Evaluator(cfg)
    if cfg.qa and given(ctx, "qa") and evaluator.mode == "nli":  # asked for, and nothing would say it did not run
        err.print(
            "[yellow]warning:[/yellow] --qa: the QA check asks an LLM (--llm); nli mode runs none, so no answer "
            "gets a QA part",
            highlight=False,
        )
    return evaluator


def _say_damaged(damaged: list[tuple[int, str]], out: Path) -> None:
    """Name each damaged line of OUT that the run scores again (``Existing.damaged``)."""
    for line, why in damaged:
        err.print(
            f"[yellow]{escape(str(out))}, line {line}:[/yellow] damaged ({escape(why)}); "
            "its row, if any, is scored again",
            highlight=False,
        )


def _failures_kept(left: list[str], out: Path) -> int:
    """How many failed reports of an earlier run a resume left in OUT (``RunResult.failures_kept``), said."""
    if left:
        err.print(
            escape(
                f"{out} still holds {len(left)} failed report{'s' * (len(left) != 1)} of an earlier run "
                f"(first: {left[0][:80]!r}): --resume --retry-errors scores again those the input still holds; "
                "one it no longer holds keeps its report (score OUT anew with --overwrite)"
            ),
            highlight=False,
        )
    return len(left)


def _check_engine(engine: str, address: str | None, *, batch_api: bool) -> None:
    """The engine's options, refused before any work: an unknown engine, --address without Ray (the run went on
    locally, silently, as if on the cluster), a provider batch on Ray."""
    from groundjudge.runs.engines import ENGINES

    if engine not in ENGINES:
        raise fail(f"--engine {engine!r}: local or ray")
    if address is not None and engine != "ray":
        raise fail(f"--address {address}: goes with --engine ray (without it the rows are scored here)")
    if engine == "ray" and batch_api:
        raise fail("--engine ray does not take --batch-api yet (run it with the local engine)")


def _device_here(device: str | None, config: Path | None) -> None:
    """Refuse, before the model loads, a ``device`` (from the config file) this machine lacks."""
    why = device_problem(device) if device else None
    if why:
        raise fail(f"device {device!r}" + (f" (the config file {config})" if config else "") + f": {why}")


def _out_files(input: str, out: Path, config: Path | None, *, replacing: bool) -> tuple[Path, Path | None]:
    """The JSONL the reports go to and the Parquet OUT made from it at the end (None: OUT is the JSONL), refused
    when OUT is a file the run reads first: its config, or its input when OUT is its Parquet (pending_rows checks
    the JSONL against the input)."""
    from groundjudge.io.tables import table_format

    parquet_out: Path | None = None
    if out.suffix.lower() == ".parquet":  # reports go to OUT.jsonl (resumable), converted at the end
        parquet_out, out = out, out.with_name(out.name + ".jsonl")
        if parquet_out.exists() and parquet_out.stat().st_size and not replacing:
            raise fail(f"{parquet_out} exists: pass --resume to continue it or --overwrite to replace it")
        table_format(parquet_out)
    not_an_input("--out", parquet_out, config, Path(input))
    not_an_input("--out", out, config)
    return out, parquet_out


def _say_parquet_not_written(parquet_out: Path, out: Path) -> None:
    err.print(
        f"[yellow]interrupted:[/yellow] {escape(str(parquet_out))} not written; the finished rows are in "
        f"{escape(str(out))}: re-run with --resume to go on",
        highlight=False,
    )


def _stop_code(result: RunResult, out: Path) -> int:
    """What a run's stop says to the user (either engine), and its exit code."""
    stopped = result.stopped
    if stopped is None:
        return EXIT_OK
    if isinstance(stopped, BudgetExceededError):
        where = f"Finished rows are in {out}" if result.rows_written else f"No row finished; {out} is as it was"
        spent = result.spent()
        after = spent["after_stop_calls"] if spent else None
        billed = (
            f" ({after} more call{'s' * (after != 1)} in flight at the stop were billed: {result.billed.calls} in "
            "all, see below)"
            if after
            else ""
        )
        err.print(
            f"[yellow]stopped:[/yellow] {escape(str(stopped))}{escape(billed)}. {escape(where)}; raise the budget "
            "and re-run with --resume to go on.",
            highlight=False,
        )
        return EXIT_BUDGET
    if isinstance(stopped, CacheMissError):
        err.print(f"[red]cache-only run stopped:[/red] {escape(str(stopped))}", highlight=False)
        return EXIT_ROWS_FAILED
    if isinstance(stopped, BatchPendingError):
        err.print(
            f"[yellow]provider batch still running:[/yellow] {escape(str(stopped))}. Finished rows are in "
            f"{escape(str(out))}; re-run the same command with --resume later to collect the batch "
            "(it is not paid twice).",
            highlight=False,
        )
        return EXIT_PENDING
    err.print(f"[red]run stopped:[/red] {escape(str(stopped))}", highlight=False)
    return EXIT_ROWS_FAILED


def _write_parquet_out(out: Path, parquet_out: Path, code: int) -> int:
    """Convert the run's JSONL ``out`` to the ``--out *.parquet`` the user asked for; returns the exit code."""
    from groundjudge.io.reports import write_parquet

    try:
        written = write_parquet(out, parquet_out)
        err.print(escape(f"wrote {parquet_out} ({written} reports; resumable JSONL in {out})"))
    except (GroundjudgeError, ValueError, OSError) as exc:
        err.print(f"[red]could not write {escape(str(parquet_out))}:[/red] {escape(str(exc))}")
        return code or EXIT_ROWS_FAILED
    return code
