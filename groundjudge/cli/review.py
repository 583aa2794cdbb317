"""``groundjudge report``, ``metrics``, ``compare`` and ``diagnose``: read finished reports, run nothing (but
``diagnose``'s context recall, which loads the NLI model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from groundjudge.cli.common import (
    EXIT_ROWS_FAILED,
    EXIT_USAGE,
    err,
    fail,
    human_console,
    load_reports,
    load_reviews,
    print_json,
    print_summary,
    print_table,
)
from groundjudge.cli.options import CacheDir, JsonOutput, NliModel, Scored, file_to_write, not_an_input
from groundjudge.errors import InputError


def report_command(
    scored: Scored,
    html: Annotated[
        Path | None, typer.Option(help="Write a self-contained HTML review page here.", callback=file_to_write)
    ] = None,
    only_flagged: Annotated[bool, typer.Option(help="Only answers that did not pass cleanly.")] = False,
    order: Annotated[
        str,
        typer.Option(
            help="The page's queue: 'risk' (riskiest first) or 'informative' (NLI / judge disagreements, decisions "
            "near a local threshold, rare labels first)."
        ),
    ] = "risk",
    reviews: Annotated[
        Path | None,
        typer.Option(
            help="A previous export of decisions (JSONL): the page says how much they moved the corrected rate."
        ),
    ] = None,
    as_json: JsonOutput = False,
) -> None:
    """Summarize a scored file; with --html, write a review page for reviewers. --json: the summary as one JSON object
    (RunSummary's keys) on stdout, the table on stderr. Exits 1 when the file holds a failed row (ERROR, a stage
    named in errors, a score that is no number), as score does for its OUT: a report of failures never looks like
    success to a script; 2 when it holds no report (an empty file: nothing was checked); 0 otherwise."""
    from groundjudge.review.summary import summarize
    from groundjudge.tally import failed_row

    not_an_input("--html", html, scored, reviews)
    reports = load_reports(scored)
    if not reports:  # a run that wrote nothing (killed, or never started) checked nothing: never a success
        raise fail(f"{scored} holds no reports (an empty file: the run that writes it wrote none): nothing to report")
    if html is not None:
        from groundjudge.review.html import ORDERS, render_html

        if order not in ORDERS:
            raise fail(f"--order must be one of {', '.join(ORDERS)}, not {order!r}")
        decided = load_reviews(reviews).labels if reviews is not None else None
        html.write_text(
            render_html(
                reports,
                title=f"groundjudge review: {scored.name}",
                only_flagged=only_flagged,
                order=order,
                reviews=decided,
            ),
            encoding="utf-8",
        )
        err.print(escape(f"wrote {html} ({sum(1 for r in reports if r.flagged or not only_flagged)} answers)"))
    summary = summarize(r for r in reports if r.flagged or not only_flagged)
    title = "groundjudge summary"
    if only_flagged:  # the subset's numbers: not the run's
        title += f" of the flagged answers only ({summary.n} of {len(reports)})"
    print_summary(human_console(as_json), summary, title)
    if as_json:
        print_json(summary.model_dump(mode="json"))
    failed = sum(1 for r in reports if failed_row(r))  # the whole file's, whatever --only-flagged showed
    if failed:
        err.print(
            escape(
                f"{failed} of {len(reports)} rows failed (ERROR, a stage named in errors, a score that is no number)"
            ),
            highlight=False,
        )
        raise typer.Exit(EXIT_ROWS_FAILED)


def metrics_command(
    scored: Annotated[Path, typer.Argument(help="Output of 'groundjudge score' on rows that carried gold labels.")],
    reviews: Annotated[
        Path | None,
        typer.Option(help="Reviewer decisions exported by the review page (JSONL): agreement with them instead."),
    ] = None,
    as_json: JsonOutput = False,
) -> None:
    """Agreement with gold labels (or with reviewers): balanced accuracy, P/R/F1, confusion, kappa, by route;
    last line JSON (a summary of it). --json: the whole metrics dict of label_metrics / review_metrics as one JSON
    object on stdout, the tables on stderr."""
    from groundjudge.review.metrics import judges_agreement, label_metrics

    if reviews is not None:
        _review_metrics(scored, reviews, as_json)
        return
    reports = load_reports(scored)
    try:
        m = label_metrics(reports)
    except ValueError as exc:
        judges = judges_agreement(reports)
        if judges is None:
            raise fail(str(exc)) from exc
        _print_judges(human_console(as_json), judges)  # no labels, but two judges to compare
        if as_json:
            print_json({"level": "judges", "judges": judges})
        else:
            typer.echo(json.dumps({"level": "judges", "judges": judges}))
        return
    console = human_console(as_json)
    console.print(f"[bold]{m['level']}-level labels[/bold]: n={m['n']}, unlabelled={m['unlabelled']}")
    _print_block(console, "all", m)
    for route, block in m["by_route"].items():
        _print_block(console, f"decided by {route}", block)
    esc = m["escalation_rate"]
    esc_text = "-" if esc is None else f"{100 * esc:.1f}% {_ci(m['escalation_rate_ci'])}"
    console.print(f"escalation rate {esc_text}, calls {m['calls']}, cost {m['cost']}")
    _print_corrected(console, m["corrected_unsupported_rate"])
    summary = {
        "level": m["level"],
        "n": m["n"],
        "balanced_accuracy": m["balanced_accuracy"],
        "balanced_accuracy_ci": m["balanced_accuracy_ci"],
        "kappa": m["kappa"],
        "kappa_ci": m["kappa_ci"],
        "escalation_rate": esc,
        "escalation_rate_ci": m["escalation_rate_ci"],
        "cost_usd": m["cost_usd"],
        "confusion": m["confusion"],
        "labels": m["labels"],
        "by_route": {
            k: {
                "n": v["n"],
                "balanced_accuracy": v["balanced_accuracy"],
                "balanced_accuracy_ci": v["balanced_accuracy_ci"],
            }
            for k, v in m["by_route"].items()
        },
        "corrected_unsupported_rate": m["corrected_unsupported_rate"],
    }
    if "three_way" in m:
        summary["balanced_accuracy_3way"] = m["three_way"]["balanced_accuracy"]
    if "judges" in m:
        _print_judges(console, m["judges"])
        summary["judges"] = m["judges"]
    if as_json:
        print_json(m)
    else:  # the last line, as before --json existed
        typer.echo(json.dumps(summary))


def _print_judges(console: Console, j: dict[str, Any]) -> None:
    """The second judge's agreement with the first judge, and with the local model where it decided (README "Second
    judge"), each named; and each one's agreement with the labels, named by where they came from."""
    blocks = [("first judge vs second judge", j), ("local model vs second judge", j.get("local_vs_judge"))]
    for name, b in blocks:
        if b is None or (not b["n"] and b is not j):
            continue
        if not b["n"]:
            console.print(f"{name}: no claim with a verdict from both ({j['second_judge_errors']} second-judge errors)")
            continue
        console.print(
            f"{name}: n={b['n']} claims of {b['answers']} answers, agreement {100 * b['agreement']:.1f}% "
            f"{_ci(b['agreement_ci'])}, {_kappa_text(b)}, disagree on {b['disagree']} claims"
            + (f" ({j['answers_disagree']} answers), second-judge errors {j['second_judge_errors']}" if b is j else ""),
            highlight=False,
        )
    vs = j.get("vs_people") or {}
    for name in ("first", "second"):
        if name in vs:
            v = vs[name]
            who = f"first verdict ({vs.get('first_is', 'judge')})" if name == "first" else "second judge"
            console.print(
                f"{who} vs {vs.get('labels_from', 'labels')} (n={vs['n']}): agreement {100 * v['agreement']:.1f}% "
                f"{_ci(v['agreement_ci'])}, {_kappa_text(v)}",
                highlight=False,
            )


def _print_reviewers(console: Console, r: dict[str, Any]) -> None:
    """Reviewers' agreement with each other (claims two of them decided), beside their agreement with groundjudge."""
    console.print(
        f"reviewers with each other: n={r['n']} pairs on {r['claims']} claims of {r['answers']} answers "
        f"({', '.join(r['reviewers'])}), agreement {100 * r['agreement']:.1f}% {_ci(r['agreement_ci'])}, "
        f"{_kappa_text(r)}, disagree on {r['disagree']}, adjudicated {r['adjudicated']}",
        highlight=False,
    )


def _kappa_text(block: dict[str, Any]) -> str:
    """``kappa 0.508 [0.210, 0.759]``, or why there is none (one label only: chance agreement is total)."""
    if block["kappa"] is None:
        return "kappa undefined (one label only)"
    return f"kappa {block['kappa']:.3f} {_ci(block['kappa_ci'], False)}"


def _ci(ci: list[float | None], percent: bool = True) -> str:
    """``[21.0, 25.9]`` (percent) or ``[0.210, 0.259]``."""
    if ci[0] is None or ci[1] is None:
        return "[-, -]"
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if percent else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _print_corrected(console: Console, c: dict[str, Any]) -> None:
    """The raw unsupported rate and the one corrected for the checker's error, or why there is no corrected one."""
    level = c["labels"]["level"]
    things = f"{level}s"
    raw = "-" if c["raw"] is None else f"{100 * c['raw']:.1f}% {_ci(c['raw_ci'])}"
    console.print(f"unsupported {things} (raw): {raw} of {c['n']}", highlight=False)
    pos, neg = c["labels"]["positives"], c["labels"]["negatives"]
    if c["value"] is None:
        needs = c["needs"]
        why = (
            f"needs {needs['positives']} more labelled {things} that are not supported (has {pos}) and "
            f"{needs['negatives']} more that are supported (has {neg})"
            if needs["positives"] or needs["negatives"]
            else c["reason"]
        )
        console.print(f"corrected for the checker's error: no number: {why}", highlight=False)
    else:
        se = "-" if c["sensitivity"] is None else f"{c['sensitivity']:.3f} {_ci(c['sensitivity_ci'], False)}"
        sp = "-" if c["specificity"] is None else f"{c['specificity']:.3f} {_ci(c['specificity_ci'], False)}"
        console.print(
            f"corrected for the checker's error: {100 * c['value']:.1f}% {_ci(c['ci'])} "
            f"(sensitivity {se}, specificity {sp}, from {pos} not supported + {neg} supported labelled {things}; "
            f"{'per route' if c['by'] == 'route' else 'pooled'})",
            highlight=False,
        )
    if c.get("failed_answers"):
        console.print(f"{c['failed_answers']} answer(s) failed whole: their claims are in no claim-level rate")


def _review_metrics(scored: Path, reviews: Path, as_json: bool) -> None:
    """``metrics --reviews``: groundjudge's claim verdicts against reviewer labels; last line JSON, or with
    ``as_json`` the whole dict alone on stdout."""
    from groundjudge.review.metrics import review_metrics

    settled = load_reviews(reviews)  # one label per claim (the disputed ones left out), and each reviewer's
    try:
        m = review_metrics(load_reports(scored), settled.labels, settled.every)
    except (ValueError, InputError) as exc:
        raise fail(f"{reviews}: {exc}") from exc
    console = human_console(as_json)
    console.print(
        f"[bold]reviewer labels[/bold] (rows) against groundjudge (columns): n={m['n']} of {m['n_reviews']} "
        f"reviews, unmatched={m['unmatched']}, changed since review={m['changed_since_review']}, "
        f"agreement {100 * m['agreement']:.1f}% {_ci(m['agreement_ci'])}"
    )
    _print_block(console, "all", m)
    for route, block in m["by_route"].items():
        _print_block(console, f"decided by {route}", block)
    if "reviewers_agreement" in m:
        _print_reviewers(console, m["reviewers_agreement"])
    _print_corrected(console, m["corrected_unsupported_rate"])
    if "judges" in m:
        _print_judges(console, m["judges"])
    if m["unmatched"]:
        err.print(
            f"{m['unmatched']} reviews match no claim of {escape(str(scored))} (answer id, claim id and claim text)",
            highlight=False,
        )
    if as_json:
        print_json(m)
        return
    typer.echo(
        json.dumps(
            {
                "level": "review",
                "n": m["n"],
                "agreement": m["agreement"],
                "agreement_ci": m["agreement_ci"],
                "kappa": m["kappa"],
                "kappa_ci": m["kappa_ci"],
                "balanced_accuracy": m["balanced_accuracy"],
                "balanced_accuracy_ci": m["balanced_accuracy_ci"],
                "confusion": m["confusion"],
                "labels": m["labels"],
                "binary": {
                    "kappa": m["binary"]["kappa"],
                    "kappa_ci": m["binary"]["kappa_ci"],
                    "balanced_accuracy": m["binary"]["balanced_accuracy"],
                    "balanced_accuracy_ci": m["binary"]["balanced_accuracy_ci"],
                },
                "by_route": {
                    k: {
                        "n": v["n"],
                        "agreement": v["agreement"],
                        "agreement_ci": v["agreement_ci"],
                        "kappa": v["kappa"],
                        "kappa_ci": v["kappa_ci"],
                        "confusion": v["confusion"],
                    }
                    for k, v in m["by_route"].items()
                },
                "unmatched": m["unmatched"],
                "changed_since_review": m["changed_since_review"],
                "disputed": m["disputed"],
                "reviewers": m["reviewers"],
                "corrected_unsupported_rate": m["corrected_unsupported_rate"],
                **({"judges": m["judges"]} if "judges" in m else {}),
                **({"reviewers_agreement": m["reviewers_agreement"]} if "reviewers_agreement" in m else {}),
            }
        )
    )


def _print_block(console: Console, title: str, block: dict[str, Any]) -> None:
    from rich.table import Table

    labels = block["labels"]
    ba_ci = f" {_ci(block['balanced_accuracy_ci'])}" if "balanced_accuracy_ci" in block else ""
    if block["kappa"] is None or "kappa_ci" in block:
        kappa = _kappa_text({"kappa_ci": [None, None], **block})
    else:
        kappa = f"kappa {block['kappa']:.3f}"
    table = Table(
        title=f"{title}: n={block['n']}, balanced accuracy {100 * block['balanced_accuracy']:.1f}{ba_ci}, {kappa}"
    )
    # a narrow terminal wraps the numbers, never a label
    table.add_column("gold \\ predicted", no_wrap=True, min_width=max(map(len, labels), default=1))
    for label in labels:
        table.add_column(label, justify="right", no_wrap=True, min_width=len(label))
    for label in ("precision", "recall", "f1"):
        table.add_column(label, justify="right", no_wrap=True, min_width=len(label))
    for i, label in enumerate(labels):
        pl = block["per_label"][label]
        table.add_row(
            label, *map(str, block["confusion"][i]), f"{pl['precision']:.3f}", f"{pl['recall']:.3f}", f"{pl['f1']:.3f}"
        )
    print_table(console, table)


def _labels_fall_on_the_runs(
    runs: tuple[list[Any], list[Any]],
    names: tuple[Path, Path],
    labels: Path | None,
    gold: dict[str, str] | None,
    reviews: Path | None,
    decided: list[Any],
) -> None:
    """compare's ``--labels`` and ``--reviews`` are for the answers both runs have (the corrected rate is measured
    there): a file none of whose labels falls there is an error, where the corrected rate was left out without a
    word (a label file of another dataset, the reviews of another run); the ones that fall nowhere are counted."""
    from groundjudge.review.metrics import join_reviews

    both = {r.id for r in runs[0]} & {r.id for r in runs[1]}
    where = f"the {len(both)} answers {names[0].name} and {names[1].name} both have"
    if labels is not None and gold is not None:
        on = sum(i in both for i in gold)
        if not on:
            raise fail(f"--labels {labels}: none of its {len(gold)} labels is for one of {where} (by answer id)")
        if on < len(gold):
            err.print(escape(f"{len(gold) - on} of the {len(gold)} labels in {labels} are for no answer of {where}"))
    if reviews is not None and not decided:
        raise fail(f"--reviews {reviews}: no claim in it has a label to use")  # the disputed ones: said above
    if reviews is not None:
        matched = {
            m.review.line for run in runs for m in join_reviews([r for r in run if r.id in both], decided).matched
        }
        if not matched:
            raise fail(
                f"--reviews {reviews}: none of its {len(decided)} reviews matches a claim of {where} (answer id, "
                "claim id and claim text)"
            )
        if len(matched) < len(decided):
            err.print(
                escape(
                    f"{len(decided) - len(matched)} of the {len(decided)} reviews in {reviews} match no claim of "
                    f"{where} (answer id, claim id and claim text)"
                )
            )


def _made_alike(said: dict[str, dict[str, str]], names: tuple[Path, Path]) -> None:
    """Say when A's and B's reports were made with other settings (``settings_differ`` of
    :func:`groundjudge.review.compare.compare_runs`): another NLI model, thresholds, preset, judge or groundjudge's
    prompts move the numbers with the answers unchanged, and compare cannot tell the two apart."""
    from groundjudge.io.made_with import differ_text

    if said:
        err.print(
            escape(
                f"warning: {names[0].name} (A) and {names[1].name} (B) were scored with other settings "
                f"({differ_text(said)}): the differences below mix the answers' change with the scoring's. Score both "
                "with one command (the same --llm, --nli-model, --preset, --config and groundjudge) to compare the "
                "answers alone."
            ),
            highlight=False,
        )


def _claims_moved(row: dict[str, Any]) -> str:
    """One answer's claim changes as compare counts them (:func:`groundjudge.review.compare.claim_changes`)."""

    def claims(n: int) -> str:
        return f"{n} claim{'' if n == 1 else 's'}"

    return (
        f"{claims(row['claim_label_changes'])} of the same text relabelled, {claims(row['claims_only_a'])} only in "
        f"A, {claims(row['claims_only_b'])} only in B"
    )


def compare_command(
    a: Annotated[Path, typer.Argument(help="Scored run A (e.g. prompt v1).")],
    b: Annotated[Path, typer.Argument(help="Scored run B of the same samples (e.g. prompt v2).")],
    as_json: JsonOutput = False,
    fail_if_worse: Annotated[
        bool,
        typer.Option(
            help="Exit 1 when B is significantly worse than A (over the answers neither failed), or B lacks answers A "
            "has, or failed (ERROR, a stage in errors, a score that is no number) on any answer, or is FAIL where A "
            "vouches for nothing (a new id; ERROR, NO_CLAIMS or a failure in A), or is NO_CLAIMS where A judged the "
            "answer; exit 2 when A and B were scored with other settings (see --allow-other-settings) or no answer has "
            "a score in both."
        ),
    ] = False,
    allow_other_settings: Annotated[
        bool,
        typer.Option(
            help="With --fail-if-worse: gate even when A and B were scored with other settings (another judge, NLI "
            "model, preset or groundjudge prompts), whose differences mix the answers' change with the scoring's."
        ),
    ] = False,
    alpha: Annotated[float, typer.Option(help="Significance level.")] = 0.05,
    html: Annotated[
        Path | None,
        typer.Option(
            help="Also write a self-contained HTML page: intervals, verdict flips, changed claims.",
            callback=file_to_write,
        ),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            help="Gold labels (JSONL rows with id and label) for both runs: the unsupported rate corrected for the "
            "checker's error."
        ),
    ] = None,
    reviews: Annotated[
        Path | None,
        typer.Option(help="Reviewer decisions exported by the review page (JSONL), as labels for the corrected rate."),
    ] = None,
) -> None:
    """Paired comparison of two runs: mean differences with bootstrap CIs, paired tests, verdict flips; the smallest
    difference the runs could detect; with labels, the unsupported rate corrected for the checker's error. --json:
    the compare_runs dict as one JSON object on stdout, the table on stderr."""
    from groundjudge.review.compare import compare_runs, corrected_rates
    from groundjudge.review.metrics import read_labels

    not_an_input("--html", html, a, b, labels, reviews)
    runs = load_reports(a), load_reports(b)
    result = compare_runs(*runs, alpha=alpha)  # its settings_differ in --json too: a script gating on B can refuse
    _made_alike(result["settings_differ"], (a, b))
    if result["paired"] == 0:
        raise fail("the two runs share no sample ids")
    gold = read_labels(labels) if labels is not None else None
    decided = load_reviews(reviews).labels if reviews is not None else []
    _labels_fall_on_the_runs(runs, (a, b), labels, gold, reviews, decided)
    corrected = corrected_rates(*runs, labels=gold, reviews=decided)
    if corrected is not None:
        result["corrected_unsupported_rate"] = corrected
    if html is not None:
        from groundjudge.review.html import render_compare_html

        page = render_compare_html(
            *runs, result, title=f"groundjudge compare: {b.name} vs {a.name}", names=(a.name, b.name)
        )
        html.write_text(page, encoding="utf-8")
        err.print(escape(f"wrote {html}"), highlight=False)
    if as_json:
        print_json(result)
    # the table: on stdout, or on stderr beside --json
    from rich.table import Table

    console = human_console(as_json)
    table = Table(title=f"B vs A over {result['paired']} paired samples")
    # a narrow terminal wraps the other columns, never cuts a metric's name
    table.add_column("metric", no_wrap=True, min_width=max(map(len, result["metrics"]), default=6))
    for col in ("mean A", "mean B", "diff", "95% CI", "p", "MDD", ""):
        table.add_column(col)
    for name, m in result["metrics"].items():
        mark = "[red]B worse[/red]" if m["b_worse"] else ("significant" if m["significant"] else "")
        mdd = m["min_detectable_diff"]
        table.add_row(
            name,
            f"{m['mean_a']:.3f}",
            f"{m['mean_b']:.3f}",
            f"{m['diff']:+.3f}",
            f"[{m['ci95'][0]:+.3f}, {m['ci95'][1]:+.3f}]",
            f"{m['p_value']:.4f}",
            "-" if mdd is None else f"±{mdd:.3f}",
            mark,
        )
    print_table(console, table)
    console.print(
        f"MDD: the minimum detectable difference, the smallest these {result['paired']} pairs detect 80% of "
        f"the time (two-sided, alpha {alpha:g})",
        highlight=False,
    )
    for name, m in result["metrics"].items():
        console.print(
            f"  {name}: A {m['mean_a']:.3f} {_ci(m['mean_a_ci'], False)}, B {m['mean_b']:.3f} "
            f"{_ci(m['mean_b_ci'], False)}"
            + (
                f"; not significant: {m['answers_needed']} paired answers would detect {m['diff']:+.3f}"
                if m["answers_needed"] is not None
                else ""
            ),
            highlight=False,
        )
    if corrected is not None:
        for side, path in (("a", a), ("b", b)):
            console.print(f"[bold]{side.upper()}[/bold] ({escape(path.name)}):")
            _print_corrected(console, corrected[side])
        said = "paired: the same labelled answers" if corrected["paired"] else "not paired: labels differ"

        def points(x: float) -> str:  # signed percentage points; a rounding speck below zero shows as +0.0
            return f"{round(100 * x, 1) + 0.0:+.1f}"

        for what, key in (("raw", "raw_diff"), ("corrected", "diff")):
            diff, (lo, hi) = corrected[key], corrected[f"{key}_ci"]
            shown = "-" if diff is None or lo is None else f"{points(diff)} points [{points(lo)}, {points(hi)}]"
            console.print(f"{what} rate B - A: {shown} ({said})", highlight=False)
    mc = result["mcnemar"]
    console.print(
        f"verdict flips: {result['verdict_flips'] or 'none'}; PASS lost {mc['pass_lost']}, "
        f"gained {mc['pass_gained']} (McNemar p={mc['p_value']:.4f})"
    )
    if result.get("error_types"):
        kinds = ", ".join(f"{k} {v['a']}->{v['b']} ({v['diff']:+d})" for k, v in result["error_types"].items())
        console.print(f"kinds of error (A->B): {escape(kinds)}")
    if result["most_changed"]:
        console.print("most changed (claims paired by text):")
    for row in result["most_changed"]:
        console.print(
            f"  {escape(row['id'])}: {row['verdict']}, combined {row['combined_diff']:+.3f}, {_claims_moved(row)}",
            highlight=False,
        )
    console.print(
        "[red]B is significantly worse than A[/red]"
        if result["b_significantly_worse"]
        else "B is not significantly worse than A"
    )
    _print_lost(console, result["b_lost"], b)
    if fail_if_worse:
        _gate(result, (a, b), allow_other_settings=allow_other_settings)


def _print_lost(console: Any, lost: dict[str, Any], b: Path) -> None:
    """The answers B lost that the paired tests cannot see (``b_lost``: missing from B, failed in B, FAIL in B where
    A vouches for nothing, NO_CLAIMS in B where A judged: :func:`groundjudge.review.compare.gate_rows`)."""
    from groundjudge.review.compare import lost_text

    for key, what in lost_text(b.name).items():
        if lost[key]:
            more = f" and {lost[key] - len(lost[f'{key}_ids'])} more" if lost[key] > len(lost[f"{key}_ids"]) else ""
            console.print(
                f"[red]{lost[key]} {escape(what)}[/red] (the paired tests do not show them: counted against B): "
                + escape(", ".join(lost[f"{key}_ids"]) + more),
                highlight=False,
            )


def _gate(result: dict[str, Any], names: tuple[Path, Path], *, allow_other_settings: bool) -> None:
    """``compare --fail-if-worse``: no gate (exit 2) on runs scored with other settings (``settings_differ``: a
    difference partly the scoring's) unless allowed; exit 1 when B is worse (``b_worse``); else no gate (exit 2)
    when no answer has a combined score in both runs (nothing was compared)."""
    if result["settings_differ"] and not allow_other_settings:
        err.print(
            escape(
                f"error: no gate: {names[0].name} (A) and {names[1].name} (B) were scored with other settings "
                "(above), so B's difference from A is partly the scoring's. Score both with one command, or pass "
                "--allow-other-settings to gate anyway."
            ),
            highlight=False,
        )
        raise typer.Exit(EXIT_USAGE)
    if result["b_worse"]:
        raise typer.Exit(EXIT_ROWS_FAILED)
    if "combined" not in result["metrics"]:  # every pair had a failure or NO_CLAIMS on one side: nothing compared
        raise fail(
            f"no gate: no answer has a score in both {names[0].name} (A) and {names[1].name} (B) (each is ERROR, "
            "NO_CLAIMS or no number in one of them), so nothing was compared and B cannot pass as no worse than A"
        )


def diagnose_command(
    scored: Scored,
    id: Annotated[str | None, typer.Option("--id", help="Only this answer [default: every failed one].")] = None,
    nli_model: NliModel = None,
    cache_dir: CacheDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON diagnosis a line.")] = False,
) -> None:
    """For failed answers: is retrieval or generation to blame? Context precision, context recall (rows with a
    reference answer), the cause, and the claims and passages behind it."""
    from groundjudge.diagnose import diagnose as run_diagnosis
    from groundjudge.diagnose import diagnosis_lines, failed, reference_of

    reports = load_reports(scored)
    if id is not None:
        reports = [r for r in reports if r.id == id]
        if not reports:
            raise fail(f"no answer with id {id!r} in {scored}")
    else:
        reports = [r for r in reports if failed(r)]
    evaluator = None
    if any(reference_of(r) for r in reports):
        from groundjudge.config import Config
        from groundjudge.pipeline.evaluator import Evaluator

        cfg = Config.make(mode="nli", nli_model=nli_model, cache_dir=str(cache_dir) if cache_dir else None)
        evaluator = Evaluator(cfg)  # context recall needs the local model
    console = Console()
    for r in reports:
        d = run_diagnosis(r, evaluator)
        if as_json:
            typer.echo(d.model_dump_json())
        else:
            for line in diagnosis_lines(d):
                console.print(escape(line), highlight=False, soft_wrap=True)
    if not reports:
        err.print("no failed answers to diagnose")
