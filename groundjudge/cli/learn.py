"""``groundjudge calibrate`` and ``tune``: the local checker learns from decided claims."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from groundjudge.atomic import atomic_write_text, same_file
from groundjudge.checker.head import MIN_CLAIMS, MIN_CLASS
from groundjudge.cli.common import err, fail, human_console, load_reports, load_reviews, print_table
from groundjudge.cli.options import (
    CacheDir,
    NliModel,
    Overwrite,
    ShowProgress,
    checked_device,
    file_to_write,
    not_an_input,
    number_option,
    target_option,
)
from groundjudge.errors import GroundjudgeError, InputError
from groundjudge.learn.tune import TuneSettings, tune
from groundjudge.learn.tune_out import TuneInterrupted

if TYPE_CHECKING:  # heavy imports (numpy, torch): only where a command needs them
    from groundjudge.checker.head import VerdictHead


# calibrate's options, declared here so that its signature reads as a list of names
LABELED = typer.Argument(
    help="Claim rows with gold labels, or 'score' output: on such rows (gold labels), with --reviews, or else the "
    "judge's own verdicts (best: a sample scored with --mode llm).",
    show_default=False,
)
CONFIG_OUT = typer.Option(
    "--out",
    "-o",
    help="Config file to write (JSON, for 'score --config'); without it the fit is shown and no file is written.",
    callback=file_to_write,
)
CALIBRATE_REVIEWS = typer.Option(
    help="Reviewer decisions (JSONL from the review page) on the claims of LABELED, a 'score' OUT; without gold "
    "labels there, the judge's verdicts teach on the claims no reviewer decided."
)
SAVE_TO_MODEL = typer.Option(
    help="Also store the cascade thresholds (and the verdict head, if one was fitted) beside the local model's "
    "weights (groundjudge.json), so that every later run with that model uses them with no flags; without a head, a "
    "head stored there before is removed."
)
CALIBRATE_HEAD = typer.Option(
    "--head/--no-head",
    help="Also fit a verdict head (a logistic model over the NLI scores and text signals, with its own thresholds) on "
    f"the same claims; it needs {MIN_CLAIMS}+ claims, {MIN_CLASS}+ SUPPORTED and not. The config then carries the "
    "head instead of the raw thresholds.",
)


def calibrate_command(
    labeled: Annotated[Path, LABELED],
    out: Annotated[Path | None, CONFIG_OUT] = None,
    target: Annotated[float, target_option("Precision the NLI-decided verdicts must reach.")] = 0.9,
    min_decided: Annotated[int, typer.Option(min=1, help="Fewest claims a threshold may rest on.")] = 10,
    unsupported: Annotated[bool, typer.Option("--unsupported/--no-unsupported", help="Also fit t_unsupported.")] = True,
    nli_model: NliModel = None,
    cache_dir: CacheDir = None,
    reviews: Annotated[Path | None, CALIBRATE_REVIEWS] = None,
    reliability: Annotated[
        Path | None,
        typer.Option(help="Write a reliability diagram of the NLI entailment (.html or .svg).", callback=file_to_write),
    ] = None,
    bins: Annotated[int, typer.Option(help="Bins of the reliability diagram.", min=2, max=50)] = 10,
    save_to_model: Annotated[bool, SAVE_TO_MODEL] = False,
    head: Annotated[bool, CALIBRATE_HEAD] = True,
) -> None:
    """Fit t_support / t_contradict (and t_unsupported) to a precision target, and a verdict head on the same claims;
    write a config 'score' takes. Labels: gold if LABELED has them, else the reviews (if given) and the judge's
    verdicts with verified quotes on the other claims."""
    from groundjudge.checker.head import claim_key
    from groundjudge.config import Config
    from groundjudge.io.reports import is_report_file
    from groundjudge.learn.calibrate import (
        crossfit_raw,
        fit_calibration_head,
        fit_thresholds,
        score_for_fitting,
    )
    from groundjudge.learn.labels import collect_labels
    from groundjudge.pipeline import Evaluator

    if not labeled.is_file():
        raise fail(f"no file {labeled}")
    not_an_input("--out", out, labeled, reviews)
    if reliability is not None and reliability.suffix.lower() not in (".html", ".htm", ".svg"):
        raise fail(f"--reliability {reliability}: write .html or .svg")
    if out is not None and reliability is not None and same_file(out, reliability):
        raise fail(f"--reliability {reliability}: that is --out {out}; one would replace the other")
    evaluator: Any = None
    from_out = is_report_file(labeled)  # a 'score' OUT: the claims are scored already
    # raw scores: a head or thresholds stored beside the model must neither change them nor stop the run (they may
    # be stale: fitted on other weights, what this command refits); the fit reads every passage's scores
    # (score_for_fitting), so no threshold of the scoring pass is in force: none decides a claim, none stops early
    never = {"t_support": "never", "t_contradict": "never", "t_unsupported": None}
    cfg = Config.make(
        nli_model=nli_model, cache_dir=str(cache_dir) if cache_dir else None, mode="nli", use_head=False, **never
    )
    if from_out:
        reports = load_reports(labeled)
    elif reviews is not None:
        raise fail(f"--reviews needs the 'groundjudge score' OUT the reviews were made on; {labeled} is not one")
    else:
        evaluator, reports = _score_claim_rows(labeled, cfg)
    settled = load_reviews(reviews) if reviews is not None else None  # one label per claim, the disputed left out
    try:
        found = collect_labels(
            reports,
            from_out=from_out,
            source=str(labeled),
            reviews=settled.labels if settled else None,
            reviews_name=str(reviews),
            disputed=settled.disputed if settled else (),
        )
    except InputError as exc:
        for note in getattr(exc, "notes", []):
            err.print(escape(note), highlight=False)
        raise fail(str(exc)) from exc
    for note in found.notes:
        err.print(escape(note), highlight=False)
    if from_out and found.fingerprints - {""}:  # thresholds and a head are stored only with the model that scored
        evaluator = evaluator or _scoring_model(cfg, labeled, found.fingerprints)
    texts, sources, labels = found.texts, found.sources, found.labels
    fingerprints, taught = found.fingerprints, found.taught
    # the lines are fitted on every selected passage's scores, as they are applied: a run's stop early (nli mode at
    # t_support, the cascade once only the NLI part could change). A report that names its model is scored again
    # with it (loaded above); one that names none keeps its stored scores (another model's would mean another thing)
    results = found.results
    rescored = evaluator is not None
    if rescored:
        results = score_for_fitting(evaluator, texts, sources)
    ent = [r.entailment for r in results]
    con = [r.contradiction for r in results]
    gold = [label == "SUPPORTED" for label in labels]
    if reliability is not None:
        _write_reliability(
            reliability, ent, gold, bins, f"{labeled.name}" + (f" + reviews {reviews.name}" if reviews else "")
        )
    try:
        fit = fit_thresholds(ent, con, gold, target=target, min_decided=min_decided, unsupported=unsupported)
    except InputError as exc:  # labels of one kind: nothing can be measured, nothing is stored
        raise fail(str(exc)) from exc
    # the raw thresholds' numbers to expect on new rows: in-sample, a fit measured on its own claims says too much
    expect = crossfit_raw(results, labels, [claim_key(t) for t in texts], target, min_decided, unsupported)
    fitted: VerdictHead | None = None
    if head:
        try:
            fitted, why_not = fit_calibration_head(
                texts,
                sources,
                results,
                labels,
                lambda: evaluator or Evaluator(cfg),
                fingerprints - {""},
                rescored=rescored,
                target=target,
                meta={"source": str(labeled), "reviews": str(reviews) if reviews else None, "labels": taught},
                min_decided=min_decided,
                unsupported=unsupported,
            )
        except GroundjudgeError as exc:
            raise fail(
                f"{exc} (the verdict head needs the NLI model that scored the claims; or pass --no-head)"
            ) from exc
        if why_not:
            err.print(
                f"[yellow]no verdict head:[/yellow] {escape(why_not)}; the config has the thresholds only.",
                highlight=False,
            )
    # "never" where no level reached the target; with a head, its own thresholds (on its probability) are in force
    # without a head the raw thresholds are on the entailment: the config turns off any head stored with the model
    written: dict[str, Any] = {"head": fitted.model_dump()} if fitted else {**fit.config_values(), "use_head": False}
    if fitted is None and evaluator is not None:  # the scores were this model's: a run with another refuses them
        written["thresholds_model"] = evaluator.nli.identity
    if nli_model:
        written["nli_model"] = nli_model
    if out is not None:  # whole or not at all; a value JSON cannot hold (NaN) is a defect, never a file
        atomic_write_text(out, json.dumps(written, indent=2, allow_nan=False) + "\n")
    if save_to_model:
        meta = {
            "source": str(labeled),
            "target": target,
            "reviews": str(reviews) if reviews else None,
            "labels": taught,
        }
        _save_to_model(nli_model, fit, fitted, {**meta, "expected": expect}, lambda: (evaluator or Evaluator(cfg)).nli)
    head_json = None
    if fitted is not None:
        head_json = {"l2": fitted.l2, "claims": fitted.meta["claims"], "out_of_fold": fitted.meta["out_of_fold"]}
    typer.echo(json.dumps(_fit_line(fit, fitted, head_json, expect, out=out, target=target, taught=taught)))
    _say_fit(fit, expect, head_json, out, with_head=fitted is not None)
    _say_if_nothing_decided(fit, fitted, target)


def _score_claim_rows(labeled: Path, cfg: Any) -> tuple[Any, list[Any]]:
    """calibrate's claim rows, read as 'score' reads its input (JSONL, CSV, Parquet; the id rule) and scored in nli
    mode: the evaluator and the reports. A label that is none stops calibrate before any scoring (a row left out
    would move the fit); a row that failed is said."""
    from groundjudge.io.labels import gold_label
    from groundjudge.io.tables import input_rows
    from groundjudge.pipeline import Evaluator

    rows = list(input_rows(labeled, set()))
    for n, row in rows:
        if isinstance(row, dict):
            gold_label(row.get("label"), n)
    evaluator = Evaluator(cfg)
    reports = list(evaluator.evaluate_numbered(rows, batch_size=64))
    _say_skipped([r for r in reports if r.verdict == "ERROR" and not r.claims])
    return evaluator, reports


def _say_if_nothing_decided(fit: Any, fitted: VerdictHead | None, target: float) -> None:
    """Say so when the cascade thresholds in force (the head's, else the raw ones) decide no claim locally (none of
    the three: a t_contradict alone calls CONTRADICTED locally, as decide_locally does)."""
    cascade = fitted.thresholds.get("cascade") if fitted is not None else fit.local
    if cascade is None or all(t is None for t in (cascade.t_support, cascade.t_contradict, cascade.t_unsupported)):
        err.print(
            f"[yellow]decides nothing locally:[/yellow] no cut-off kept a local precision of {target:g} on these "
            f"{fit.n} labelled claims, so a cascade run with this config sends every claim to the judge. More "
            "labelled claims (they narrow what each cut-off is known to do) or a lower --target let it decide some.",
            highlight=False,
        )


def _say_fit(
    fit: Any, expect: dict[str, Any], head_json: dict[str, Any] | None, out: Path | None, *, with_head: bool
) -> None:
    """The calibrate summary on stderr: the raw thresholds in-sample, what to expect of them on new rows, the head."""
    escalation = expect["escalation_rate"]
    expected = (
        f"To expect on new rows: escalation {'-' if escalation is None else f'{100 * escalation:.1f}%'} (counted "
        f"with the stored thresholds); cross-fitted local precision {_precision(expect)}."
        if expect["measured"] == "cross-fitted"
        else f"What to expect on new rows is {expect['measured']}."
    )
    wrote = f" Wrote {escape(str(out))}" + (" (with the head and its thresholds)." if with_head else ".")
    err.print(
        f"Raw thresholds (on the entailment, in-sample): NLI decides {fit.decided} of {fit.n} claims locally "
        f"(precision {_num(fit.local_precision)}); escalation rate {100 * fit.escalation_rate:.1f}%. {expected}"
        + ("" if head_json is None else " " + _head_line(head_json))
        + (wrote if out is not None else " No config written (pass --out FILE to keep it for 'score --config')."),
        highlight=False,
    )


def _scoring_model(cfg: Any, labeled: Path, fingerprints: set[str]) -> Any:
    """The nli-mode Evaluator of the model that scored a 'score' OUT's claims (its ``versions.nli_model``
    ``fingerprints``); calibrate stops when the config names another or it cannot be loaded."""
    from groundjudge.learn.calibrate import foreign_fingerprints
    from groundjudge.pipeline import Evaluator

    try:
        evaluator = Evaluator(cfg)
        identity = evaluator.nli.identity
    except GroundjudgeError as exc:
        raise fail(
            f"{exc} (thresholds are fitted on the scores of the NLI model that scored the claims: pass it as "
            "--nli-model)"
        ) from exc
    other = foreign_fingerprints(fingerprints, identity)
    if other:
        raise fail(
            f"the claims of {labeled} were scored by NLI model {other[0]}, not by the one this config would "
            f"name ({identity}): thresholds and heads are fitted only on scores of the model they are stored "
            "with; pass that model as --nli-model"
        )
    return evaluator


def _say_skipped(bad: list[Any]) -> None:
    """The claim rows calibrate could not read: the first five, then how many more."""
    for r in bad[:5]:
        err.print(f"[yellow]skipped:[/yellow] {escape('; '.join(r.errors))}", highlight=False)
    if len(bad) > 5:
        err.print(f"[yellow]skipped:[/yellow] {len(bad) - 5} more rows that could not be read", highlight=False)


def _write_reliability(path: Path, entailment: list[float], gold: list[bool], bins: int, source: str) -> None:
    """``calibrate --reliability``: the reliability diagram of the NLI entailment, as .svg or an .html page."""
    from groundjudge.learn.calibrate import expected_calibration_error, reliability_bins
    from groundjudge.review.html import render_reliability_html
    from groundjudge.review.plots import reliability_svg, standalone

    diagram = reliability_bins(entailment, gold, n_bins=bins)
    ece = expected_calibration_error(diagram)
    if path.suffix.lower() == ".svg":
        path.write_text(standalone(reliability_svg(diagram)), encoding="utf-8")
    else:
        page = render_reliability_html(diagram, subtitle=f"{len(gold)} claims from {source}", ece=ece)
        path.write_text(page, encoding="utf-8")
    err.print(escape(f"wrote {path} ({len(gold)} claims, expected calibration error {ece:.3f})"), highlight=False)


def _save_to_model(
    nli_model: str | None, fit: Any, fitted: VerdictHead | None, meta: dict[str, Any], load: Callable[[], Any]
) -> None:
    """``calibrate --save-to-model``: the cascade thresholds (and the head, if one was fitted) beside the weights,
    with the identity of the model in the folder (``load`` gives it, loaded), which a later run checks them by."""
    from groundjudge.checker.nli import resolve_model_name
    from groundjudge.checker.profile import read_model_head, write_model_fit

    model_dir = Path(resolve_model_name(nli_model))
    if not model_dir.is_dir():
        raise fail(f"--save-to-model needs a local model folder; {model_dir} is not one (pass --nli-model PATH)")
    meta = {
        **meta,
        "n": fit.n,
        "measured": "in-sample",  # on the claims the thresholds were fitted on: expect less on new rows
        "local_precision": fit.local_precision,
        "escalation_rate": fit.escalation_rate,
    }
    # without a new head, an older one stored there would override the thresholds just stored: removed (one that
    # does not parse too: this is the command that replaces it)
    try:
        stale = fitted is None and read_model_head(model_dir) is not None
    except GroundjudgeError:
        stale = True
    try:
        identity = load().identity  # the weights they were fitted for: a run with other weights there refuses them
    except GroundjudgeError as exc:
        raise fail(f"could not load the model in {model_dir} (nothing there was changed): {exc}") from exc
    try:  # one write: thresholds, meta, head and the model's identity together, or nothing
        head = fitted.model_dump() if fitted else None
        saved = write_model_fit(model_dir, {"cascade": fit.local}, meta, head, model=identity)
    except (GroundjudgeError, OSError, ValueError) as exc:
        raise fail(f"could not store the thresholds beside {model_dir} (nothing there was changed): {exc}") from exc
    if fitted is not None:
        said = f"stored the cascade thresholds and the verdict head in {saved} (the head's thresholds are in force)"
    else:
        said = f"stored the cascade thresholds in {saved}" + (
            "; removed the verdict head stored there (it would have overridden them)" if stale else ""
        )
    err.print(escape(said), highlight=False)


def _fit_line(
    fit: Any,
    head: VerdictHead | None,
    head_json: dict[str, Any] | None,
    expect: dict[str, Any],
    *,
    out: Path | None,
    target: float,
    taught: Any,
) -> dict[str, Any]:
    """calibrate's JSON line: first what the config holds and how it was measured (a head's thresholds on its
    probability, out of fold; else the raw thresholds on the entailment, cross-fitted: ``expect``), then the raw fit,
    marked in-sample, with ``expect`` beside it. It led with the raw in-sample numbers (precision 1.0) while the
    config held the head's."""
    raw = {**fit.as_dict(), "measured": "in-sample", "expected": expect}
    if head is not None and head_json is not None:
        cascade = head.thresholds["cascade"]
        oof = head_json["out_of_fold"]
        held = {
            "in_force": "head",
            "scale": "the head's probability of SUPPORTED",
            "t_support": cascade.t_support,
            "t_contradict": cascade.t_contradict,
            "t_unsupported": cascade.t_unsupported,
            "measured": "out-of-fold",
            "local_precision": oof.get("local_precision"),
            "local_precision_ci": oof.get("local_precision_ci"),
            "escalation_rate": oof.get("escalation_rate"),
        }
    else:
        held = {
            "in_force": "thresholds",
            "scale": "entailment",
            **{k: raw[k] for k in ("t_support", "t_contradict", "t_unsupported")},
            "measured": expect["measured"],
            "local_precision": expect["local_precision"],
            "local_precision_ci": expect["local_precision_ci"],
            "escalation_rate": expect["escalation_rate"],
        }
    return {
        "config": None if out is None else str(out),
        **held,
        "n": fit.n,
        "target": target,
        "labels": taught,
        "head": head_json,
        "raw": raw,
    }


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _precision(m: dict[str, Any], fmt: Callable[[float | None], str] = _num, where: str = " on new rows") -> str:
    """A measured local precision with the interval it should land in on new rows, where there is one
    (:func:`groundjudge.learn.calibrate.pooled_measure`)."""
    ci = m.get("local_precision_ci")
    return fmt(m.get("local_precision")) + ("" if not ci else f" ({fmt(ci[0])}-{fmt(ci[1])}{where})")


def _head_line(head: dict[str, Any]) -> str:
    """What the verdict head does out of fold, in one sentence."""
    oof = head["out_of_fold"]
    accuracy = oof.get("nli_balanced_accuracy")
    escalation = oof.get("escalation_rate")
    return (
        f"Verdict head ({head['claims']} claims, L2 {head['l2']:g}), out of fold: balanced accuracy "
        f"{'-' if accuracy is None else f'{accuracy:.1f}%'} in nli mode; in the cascade, escalation "
        f"{'-' if escalation is None else f'{100 * escalation:.1f}%'} at local precision {_precision(oof)}."
    )


def tune_command(
    data: Annotated[list[Path], typer.Argument(help="JSONL: gold claim rows, 'score' output, review decisions.")],
    base: Annotated[str, typer.Option(help="The NLI model to start from (hub id or path).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the tuned model and its thresholds.")],
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the training pairs.")] = TuneSettings.epochs,
    lr: Annotated[
        float, number_option("Peak learning rate (AdamW, linear warmup and decay).", least=0, open_least=True)
    ] = TuneSettings.lr,
    batch_size: Annotated[
        int | None, typer.Option(min=1, help="Pairs per training step [default: 16 on CPU, 32 on a GPU].")
    ] = None,
    max_length: Annotated[int, typer.Option(min=16, help="Tokens per training pair.")] = TuneSettings.max_length,
    distill: Annotated[
        float, number_option("Weight of the pull towards the base model's predictions (against forgetting).", least=0)
    ] = TuneSettings.distill,
    l2sp: Annotated[float, number_option("Weight of the pull towards the base weights (L2-SP).", least=0)] = 0.0,
    holdout: Annotated[float, typer.Option(help="Share of claims held out for calibration and the report.")] = 0.2,
    target: Annotated[float, target_option("Precision the cascade's local verdicts must reach.")] = 0.9,
    seed: Annotated[int, typer.Option(help="Seed of the held-out split and the training.")] = 0,
    device: Annotated[
        str | None, typer.Option(help="cuda, mps or cpu [default: best available].", callback=checked_device)
    ] = None,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    head: Annotated[
        bool, typer.Option("--head/--no-head", help="Fit a verdict head on the held-out slice and store it.")
    ] = TuneSettings.head,
    progress: ShowProgress = True,
) -> None:
    """Fine-tune the local NLI checker on labelled claims (gold, judge verdicts, reviews); rerun to resume."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Table

    from groundjudge.cache import Cache
    from groundjudge.checker.profile import read_model_profile

    settings = TuneSettings(
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        max_length=max_length,
        distill=distill,
        l2sp=l2sp,
        holdout=holdout,
        target=target,
        seed=seed,
        head=head,
    )
    if not 0 < holdout < 1:
        err.print("[red]error:[/red] --holdout must be in (0, 1)")
        raise typer.Exit(2)
    columns = [
        TextColumn("tuning"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    try:
        with Progress(*columns, console=err, disable=not progress) as bar:
            task = bar.add_task("tuning", total=None, loss=0.0)

            def advance(step: int, total: int, loss: float) -> None:
                bar.update(task, completed=step, total=total, loss=loss)

            result = tune(
                data,
                base,
                out,
                settings,
                device=device,
                cache=Cache(cache_dir),
                overwrite=overwrite,
                progress=advance,
                log=lambda m: err.print(m, highlight=False),
            )
    except TuneInterrupted as stop:  # this run's pairs, scores, checkpoint or finished training, as far as it got
        err.print(
            f"[yellow]interrupted:[/yellow] what was done is kept in {escape(str(stop.state))}; rerun the same "
            "command to resume"
        )
        raise typer.Exit(130) from None
    except KeyboardInterrupt:  # before tune wrote anything of this run to OUT (a .tune there may be another run's)
        err.print(
            "[yellow]interrupted:[/yellow] before tune kept anything of this run; rerun the same command to start "
            "again (NLI scores already computed are in the cache)"
        )
        raise typer.Exit(130) from None
    table = Table(title=f"held-out slice: {result['n_held_out']} claims never trained on")
    for col in ("", "NLI-only bal. acc.", f"escalation @{target:.0%}", "local precision", "contra P", "contra R"):
        table.add_column(col)

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    rows = [("before", result["before"]), ("after", result["after"])]
    if result["head"]["fitted"]:
        rows.append(("after + head", result["head"]["out_of_fold"]))
    for name, m in rows:
        table.add_row(
            name,
            f"{m['nli_balanced_accuracy']:.1f}",
            pct(m["escalation_rate"]),
            _precision(m, pct, where=""),
            pct(m["contradiction_precision"]),
            pct(m["contradiction_recall"]),
        )
    print_table(human_console(False), table)  # on stdout, as before; to a pipe at its own width, never cut
    stored = read_model_profile(out)
    if stored:
        thresholds = {m: t.model_dump() for m, t in stored.items()}
        err.print(escape(f"wrote {out} with thresholds {thresholds}"), highlight=False)
    else:
        err.print(
            escape(
                f"wrote {out} with no thresholds: {result['thresholds_reason']}. Until it has some a cascade run "
                "decides with the generic cut-offs, which were not measured on this model: fit them on a judged "
                f"sample first (groundjudge calibrate judged.jsonl --nli-model {out} --target 0.9 --save-to-model)"
            ),
            highlight=False,
        )
    if result["head"]["fitted"]:
        err.print(
            f"and a verdict head ({result['head']['digest']}, fitted on {result['head']['claims']} held-out claims) "
            f"with its own thresholds {result['head']['thresholds']}; the pipeline applies it beside the weights",
            highlight=False,
        )
    else:  # said here, once (tune() logs the rest of the run as it happens)
        err.print(f"no verdict head stored: {escape(str(result['head'].get('reason')))}", highlight=False)
    typer.echo(json.dumps(result))
