"""``groundjudge score``: options -> Config -> the input checks and one engine call (:mod:`groundjudge.runs`: the
local engine or Ray, one contract); ``--dry-run``; a run's stop -> its message and exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from groundjudge.cli.common import (
    EXIT_BUDGET,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_ROWS_FAILED,
    EXIT_USAGE,
    CacheDir,
    JsonOutput,
    cost_cell,
    err,
    fail,
    limits_cell,
    print_json,
    print_summary,
    progress_bar,
)
from groundjudge.cli.notes import local_model_note, model_parameters
from groundjudge.errors import BatchPendingError, BudgetExceededError, CacheMissError, GroundjudgeError, InputError

if TYPE_CHECKING:
    from groundjudge.runs.out import RunResult

_CONFIG_OPTIONS = {
    "mode": "mode",
    "llm": "llm",
    "base_url": "base_url",
    "nli_model": "nli_model",
    "qa": "qa",
    "cache_dir": "cache_dir",
    "cache_mode": "cache_mode",
    "budget": "budget_usd",
    "price": "price",
    "max_calls": "max_calls",
    "concurrency": "concurrency",
    "rpm": "rpm",
    "tpm": "tpm",
    "preset": "preset",
    "batch_api": "batch_api",
    "nli_kind": "nli_kind",
    "nli_supported_label": "nli_supported_label",
    "nli_trust_remote_code": "nli_trust_remote_code",
    "nli_max_length": "nli_max_length",
    "head": "use_head",
    "citation_style": "citation_style",
    "second_judge": "second_judge",
    "second_judge_base_url": "second_judge_base_url",
    "second_judge_sample": "second_judge_sample",
    "second_judge_price": "second_judge_price",
}


# --batch-api without --batch-size: rows evaluated together, so that each stage sends one provider batch.
_BATCH_API_ROWS = 5000


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (or in the environment), not left at its default."""
    source = ctx.get_parameter_source(name)  # by name: typer may bring its own copy of click's enum
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def score_command(
    ctx: typer.Context,
    input: Annotated[
        str,
        typer.Argument(
            help="Rows {id, contexts, answer | claim, question?, label?, reference?}: .jsonl, .csv, .parquet or a "
            "folder of Parquet files; a path or a URI pyarrow reads (s3://...). RAGAS and DeepEval column names "
            "are recognised.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Where the reports go, one JSON object a line; a .parquet OUT is written from OUT.jsonl (kept, "
            "for --resume) at the end.",
        ),
    ],
    columns: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--map",
            help="Column mapping field=column,...: e.g. answer=response,contexts=retrieved_contexts "
            "(context=COLUMN: a cell may be one passage).",
        ),
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="nli, cascade or llm \\[default: cascade with --llm, else nli].")
    ] = None,
    citation_style: Annotated[
        str,
        typer.Option(
            help="Citation markers in answers: auto ([1], [2, 3], 【1】, ^1, [context-id]), numeric (positions "
            "only), id (context ids only), footnote (^1 only) or none."
        ),
    ] = "auto",
    llm: Annotated[Optional[str], typer.Option(help="provider/model, e.g. openai/gpt-4o-mini.")] = None,  # noqa: UP045
    base_url: Annotated[Optional[str], typer.Option(help="Server for an OpenAI-compatible model.")] = None,  # noqa: UP045
    nli_model: Annotated[
        str | None,
        typer.Option(help="NLI model id or path \\[default: $GROUNDJUDGE_NLI_MODEL or the hub default]."),
    ] = None,
    second_judge: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            metavar="PROVIDER/MODEL",
            help="A second judge for flagged answers (FAIL, a contradicted claim, a judge verdict the local model "
            "disagrees with) and the --second-judge-sample: it judges the same claims with the same prompt; "
            "disagreements are flagged (judges_disagree) and counted, never scored.",
        ),
    ] = None,
    second_judge_base_url: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Server of the second judge (--base-url serves the first)."),
    ] = None,
    second_judge_sample: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(
            help="Share of the other answers the second judge also sees (e.g. 0.1), picked by a hash of the row id: "
            "the same answers on every rerun."
        ),
    ] = None,
    second_judge_price: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(metavar="IN,OUT", help="The second judge's price in USD per million input and output tokens."),
    ] = None,
    qa: Annotated[bool, typer.Option("--qa/--no-qa", help="QA-consistency check (with an LLM).")] = True,
    cache_dir: CacheDir = None,
    cache_mode: Annotated[str, typer.Option(help="use, off, only (replay; a miss is an error) or refresh.")] = "use",
    budget: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(
            help="Stop before spending more than this many USD (the model needs a price: the table's or --price)."
        ),
    ] = None,
    price: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            metavar="IN,OUT",
            help="The LLM's price in USD per million input and output tokens (e.g. 0.5,1.5), instead of the price "
            "table's; a model without one (any openai-compatible/...) has an unknown cost and takes no --budget.",
        ),
    ] = None,
    max_calls: Annotated[Optional[int], typer.Option(help="Stop before more than this many LLM calls.")] = None,  # noqa: UP045
    concurrency: Annotated[
        int,
        typer.Option(
            help="LLM calls in flight at once, at most: cut on a provider's 429 (halved; by a tenth when it sends "
            "Retry-After), grown back by one a round trip while calls succeed."
        ),
    ] = 4,
    rpm: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(help="LLM requests per minute, at most, sent evenly (the provider's limit for the model)."),
    ] = None,
    tpm: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(help="LLM tokens (input + output) per minute, at most (the provider's limit)."),
    ] = None,
    batch_size: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            help="Rows evaluated together (NLI batches across them); with --batch-api, unless given here, "
            f"{_BATCH_API_ROWS}, so that each stage sends one provider batch \\[default: 32].",
            min=1,
        ),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            help="Thresholds by use case: default, support-bot, knowledge-base, medical-legal, research "
            "\\[default: default]."
        ),
    ] = None,
    config: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="JSON config (e.g. from 'groundjudge calibrate'); options given here override it."),
    ] = None,
    resume: Annotated[bool, typer.Option(help="Skip ids already in OUT and append.")] = False,
    retry_errors: Annotated[
        bool, typer.Option(help="With --resume: score again the rows whose report in OUT failed, replacing it.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option(help="Replace OUT if it exists (kept until the new run has its first row).")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            help="Say how many LLM calls the run needs (exact where the cache holds the claims and their NLI scores, "
            "else an upper bound), how many are cached (free) and the cost, and exit: JSON on stdout, the same in "
            "words on stderr; sends and writes nothing."
        ),
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
    as_json: JsonOutput = False,
    batch_api: Annotated[
        bool,
        typer.Option(
            help="Send each stage's LLM calls through the provider's batch API (half price, results within a day; "
            "the batch ids are kept beside OUT, so a rerun resumes them). Rows go "
            f"{_BATCH_API_ROWS} at a time unless --batch-size is given: one provider batch per stage for the whole "
            "input, not one per 32 rows, each awaited in turn."
        ),
    ] = False,
    nli_kind: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Local checker kind: auto, nli, binary, seq2seq \\[default: auto, from the model's config]."),
    ] = None,
    nli_supported_label: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="Binary checkers whose labels are LABEL_0/LABEL_1: the index that means supported."),
    ] = None,
    nli_trust_remote_code: Annotated[
        bool, typer.Option(help="Allow a local checker that runs its own code (e.g. HHEM-2.1-open).")
    ] = False,
    nli_max_length: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="Tokens per (passage, claim) pair \\[default: the model's own limit]."),
    ] = None,
    head: Annotated[
        bool,
        typer.Option(
            "--head/--no-head",
            help="Apply the verdict head of the config or the one stored beside the model's weights; --no-head: "
            "raw NLI scores \\[default: a head if the config or the model has one].",
            show_default=False,
        ),
    ] = True,
    engine: Annotated[
        str, typer.Option(help="local, or ray: score on a Ray cluster (pip install 'groundjudge\\[ray]').")
    ] = "local",
    address: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="With --engine ray: the cluster (ray://HOST:10001, auto) \\[default: $RAY_ADDRESS or local]."
        ),
    ] = None,
) -> None:
    """Score answers against their sources; one report per input row, written as each finishes. The run's summary
    goes to stderr as a table; with --json also to stdout as one JSON object (RunSummary's keys)."""
    from groundjudge.config import Config
    from groundjudge.io.tables import parse_mapping, table_format
    from groundjudge.pipeline import Evaluator
    from groundjudge.runs import pending_rows, score_rows
    from groundjudge.runs.engines import ENGINES
    from groundjudge.runs.out import batch_state_path

    parquet_out: Path | None = None
    try:
        mapping = parse_mapping(columns)
        if out.suffix.lower() == ".parquet":  # reports go to OUT.jsonl (resumable), converted at the end
            parquet_out, out = out, out.with_name(out.name + ".jsonl")
            if parquet_out.exists() and parquet_out.stat().st_size and not (resume or overwrite or dry_run):
                raise fail(f"{parquet_out} exists: pass --resume to continue it or --overwrite to replace it")
            table_format(parquet_out)
        # the run's input checks (no input file, --out is the input, --retry-errors without --resume, the format)
        pending = pending_rows(input, out, columns=mapping, resume=resume, retry_errors=retry_errors)
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc
    if out.exists() and out.stat().st_size and not (resume or overwrite or dry_run):
        raise fail(f"{out} exists: pass --resume to continue it or --overwrite to replace it")
    per_mtok = _parse_price(price) if price is not None else None
    second_per_mtok = _parse_price(second_judge_price, "--second-judge-price") if second_judge_price else None
    values = {
        "mode": mode,
        "llm": llm,
        "base_url": base_url,
        "nli_model": nli_model,
        "qa": qa,
        "cache_dir": str(cache_dir) if cache_dir else None,
        "cache_mode": cache_mode,
        "budget": budget,
        "price": per_mtok,
        "max_calls": max_calls,
        "concurrency": concurrency,
        "rpm": rpm,
        "tpm": tpm,
        "preset": preset,
        "batch_api": batch_api,
        "nli_kind": nli_kind,
        "nli_supported_label": nli_supported_label,
        "nli_trust_remote_code": nli_trust_remote_code,
        "nli_max_length": nli_max_length,
        "head": head,
        "citation_style": citation_style,
        "second_judge": second_judge,
        "second_judge_base_url": second_judge_base_url,
        "second_judge_sample": second_judge_sample,
        "second_judge_price": second_per_mtok,
    }
    # only what was given: the CLI's own defaults must not overwrite a config file's values
    overrides = {_CONFIG_OPTIONS[k]: v for k, v in values.items() if v is not None and _given(ctx, k)}
    try:
        cfg = Config.load(config, **overrides) if config else Config.make(**overrides)
        if cfg.batch_api and cfg.batch_state is None:  # beside OUT: a rerun of this command resumes the batches
            cfg = Config.make(**cfg.model_dump(exclude_unset=True), batch_state=str(batch_state_path(out)))
        evaluator = Evaluator(cfg)
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc

    if batch_size is None:  # one provider batch per stage, not one per 32 rows awaited in turn (up to a day each)
        batch_size = _BATCH_API_ROWS if cfg.batch_api else 32
    if engine not in ENGINES:
        raise fail(f"--engine {engine!r}: local or ray")
    if engine == "ray" and cfg.batch_api and not dry_run:
        raise fail("--engine ray does not take --batch-api yet (run it with the local engine)")
    for line, why in pending.existing.damaged:
        err.print(
            f"[yellow]{escape(str(out))}, line {line}:[/yellow] damaged ({escape(why)}); "
            "its row, if any, is scored again",
            highlight=False,
        )
    if dry_run:  # writes nothing, ever
        try:
            estimate = evaluator.estimate(row for _, row in pending.rows if not isinstance(row, InputError))
        except GroundjudgeError as exc:  # a bad --nli-model, when some row needed the model
            raise fail(str(exc)) from exc
        if as_json:  # one line, as every --json
            print_json(estimate)
        else:
            typer.echo(json.dumps(estimate, indent=2))  # for scripts, on stdout; the sentence for people, on stderr
        err.print(escape(estimate["note"]), highlight=False)
        raise typer.Exit(EXIT_OK)

    console = Console(stderr=True, soft_wrap=True)
    on_ray = engine == "ray"
    if on_ray:
        if cfg.resolved_mode == "nli":  # the model loads on the workers: its name only
            from groundjudge.checker.nli import resolve_model_name

            err.print(escape(local_model_note(resolve_model_name(cfg.nli_model))), highlight=False)
    else:
        try:
            nli = evaluator.nli  # load the model now: a bad --nli-model is a usage error; the rate excludes loading
        except GroundjudgeError as exc:
            raise fail(str(exc)) from exc
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
            try:
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
            except GroundjudgeError as exc:  # raised before any row (input, config, cluster): a usage error
                raise fail(str(exc)) from exc
        code = _stop_code(result, out)
    finally:
        if parquet_out is not None and out.exists():
            code = _write_parquet_out(out, parquet_out, code)
    print_summary(console, result.summary)
    for line in result.spent_lines():  # what the ledger billed that the rows above do not show
        err.print(escape(line), highlight=False)
    if as_json:
        spent = result.spent()
        print_json({**result.summary.model_dump(mode="json"), **({"spent": spent} if spent else {})})
    if code == EXIT_OK and result.summary.rows_failed:
        code = EXIT_ROWS_FAILED
    raise typer.Exit(code)


def _parse_price(text: str, option: str = "--price") -> dict[str, float]:
    """``--price IN,OUT`` as ``Config.price``; the values are checked (>= 0) by the config."""
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError(text)
        return {"input_per_mtok": float(parts[0]), "output_per_mtok": float(parts[1])}
    except ValueError:
        raise fail(
            f"{option} {text!r}: two numbers IN,OUT, USD per million input and output tokens (e.g. {option} 0.5,1.5)"
        ) from None


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
    from groundjudge.review.report import write_parquet

    try:
        written = write_parquet(out, parquet_out)
        err.print(escape(f"wrote {parquet_out} ({written} reports; resumable JSONL in {out})"))
    except (GroundjudgeError, ValueError, OSError) as exc:
        err.print(f"[red]could not write {escape(str(parquet_out))}:[/red] {escape(str(exc))}")
        return code or EXIT_ROWS_FAILED
    return code
