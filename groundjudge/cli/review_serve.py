"""``groundjudge review serve`` / ``add-reviewer`` / ``export``: the review service for a team (groundjudge.serve).

Needs the ``serve`` extra; without it each command says so (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from groundjudge.cli.command import Command
from groundjudge.cli.common import err, fail, load_reports
from groundjudge.cli.options import file_to_write, not_an_input

review_app = typer.Typer(
    help="Review as a team: a service that keeps every decision in a database (SQLite or PostgreSQL).",
    no_args_is_help=True,
)

Db = Annotated[
    str,
    typer.Option(
        "--db",
        help="The review database: sqlite:///FILE (or a path), or postgresql://USER:PASSWORD@HOST:PORT/NAME.",
    ),
]


def _serve_parts() -> Any:
    try:
        from groundjudge.serve import db
    except ImportError as exc:
        raise fail(f"the review service needs the serve extra: pip install 'groundjudge[serve]' ({exc})") from exc
    return db


@review_app.command("serve", cls=Command)
def serve_command(
    runs: Annotated[list[Path], typer.Argument(help="Output(s) of 'groundjudge score': their answers to review.")],
    db_url: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="The review database: sqlite:///FILE (or a path), or postgresql://USER:PASSWORD@HOST:PORT/NAME. "
            "Default: RUN.review.sqlite beside the first run.",
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    order: Annotated[
        str, typer.Option(help="The queue: 'risk' (riskiest first) or 'informative', as report --html.")
    ] = "risk",
    only_flagged: Annotated[
        bool,
        typer.Option(
            "--only-flagged/--every-answer", help="Only answers that did not pass cleanly (as report --html)."
        ),
    ] = True,
    overlap: Annotated[
        float, typer.Option(help="Share of answers (0 to 1) that go to two reviewers, to measure their agreement.")
    ] = 0.1,
    batch: Annotated[int, typer.Option(help="Answers given to a reviewer at a time (at most --max-open).", min=1)] = 10,
    max_open: Annotated[
        int,
        typer.Option(
            help="Unfinished answers a reviewer may hold at most: More answers (POST /api/queue/next) gives none "
            "past it, so that no reviewer takes the queue from the others.",
            min=1,
        ),
    ] = 50,
    sign_in_limit: Annotated[
        int, typer.Option(help="Failed sign-ins (or bad tokens) allowed per address a minute.", min=1)
    ] = 10,
    secure_cookie: Annotated[
        bool, typer.Option(help="Send the session cookie over HTTPS only (behind a TLS proxy).")
    ] = False,
    origin: Annotated[
        list[str] | None,
        typer.Option(
            help="The address reviewers open (https://review.example.org), when a proxy in front sends the service "
            "another Host (nginx's default): sign-in and decisions from it are accepted. Repeatable."
        ),
    ] = None,
) -> None:
    """Load the runs' answers into the review database and serve the review page and its API (/api, OpenAPI at
    /api/openapi.json) until stopped. Reviewers sign in with the token 'review add-reviewer' printed."""
    db = _serve_parts()
    from groundjudge.serve import load, store
    from groundjudge.serve.app import cannot_listen, check_takes, create_app, origin_of, run

    origins = [origin_of(o) for o in origin or []]  # a bad one stops here, before the database is touched
    check_takes(batch, max_open)  # so does a take bigger than a reviewer may hold
    if (why := cannot_listen(host, port)) is not None:  # so does a port the service could not listen on
        raise fail(f"cannot listen on {host} port {port}: {why}; give another --port (or --host)")
    url = db_url or db.default_url(runs[0])
    loaded = [(str(p), load_reports(p)) for p in runs]
    engine = db.open_db(url)
    result = load.load_runs(engine, loaded, order=order, only_flagged=only_flagged, overlap=overlap)
    err.print(
        escape(
            f"review database {db.shown_url(url)}: {result.answers_added} answers added from {result.added} run(s), "
            f"{result.kept} run(s) already there; {result.answers} answers in the queue; "
            f"{len(store.reviewers(engine))} reviewer(s)"
        ),
        highlight=False,
    )
    app = create_app(
        engine,
        batch=batch,
        max_open=max_open,
        order=order,
        only_flagged=only_flagged,
        sign_in_limit=sign_in_limit,
        secure_cookie=secure_cookie,
        origins=origins,
    )
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"serving the review at http://{shown}:{port}/ (Ctrl-C stops it)", err=False)
    run(app, host, port)


@review_app.command("add-reviewer", cls=Command)
def add_reviewer_command(
    name: Annotated[str, typer.Argument(help="The reviewer's name, as the export and the team page show it.")],
    db_url: Db,
    adjudicator: Annotated[bool, typer.Option(help="May settle the claims reviewers disagree on.")] = False,
) -> None:
    """Create a reviewer and print their access token as the last line (shown once: only its hash is stored)."""
    db = _serve_parts()
    from groundjudge.serve import store

    engine = db.open_db(db_url)
    token = store.add_reviewer(engine, name, "adjudicator" if adjudicator else "reviewer")
    err.print(
        escape(f"reviewer {name.strip()!r} added to {db.shown_url(db_url)}; their token (shown once) follows"),
        highlight=False,
    )
    typer.echo(token)


@review_app.command("new-token", cls=Command)
def new_token_command(
    name: Annotated[str, typer.Argument(help="The reviewer's name, as 'review add-reviewer' gave it.")],
    db_url: Db,
    revoke: Annotated[
        bool, typer.Option(help="Give no new token: the reviewer can no longer sign in (new-token lets them back).")
    ] = False,
) -> None:
    """Replace a reviewer's access token (a leaked one, a reviewer who left): the old token and their sessions stop
    working at once, a running service included; their decisions stay. The new token is the last line printed."""
    db = _serve_parts()
    from groundjudge.serve import store

    engine = db.open_db(db_url, migrate=False)  # a reviewer's database: a mistyped --db is no new, empty one
    token = store.new_token(engine, name, revoke=revoke)
    where = db.shown_url(db_url)
    if token is None:
        err.print(
            escape(
                f"reviewer {name.strip()!r} in {where}: token revoked and signed out; their decisions stay, their "
                "unfinished answers go back to the team's queue"
            ),
            highlight=False,
        )
        return
    err.print(
        escape(
            f"reviewer {name.strip()!r} in {where}: old token revoked and signed out; the new one (shown once) follows"
        ),
        highlight=False,
    )
    typer.echo(token)


@review_app.command("export", cls=Command)
def export_command(
    db_url: Db,
    out: Annotated[
        Path,
        typer.Option(help="Write the decisions here (JSONL, as the review page exports them).", callback=file_to_write),
    ],
) -> None:
    """Write every reviewer's latest decision on each claim, and each adjudication, as JSONL: the file
    'metrics --reviews', 'calibrate --reviews' and 'tune' read. A decision without a verdict (cleared, or a note
    alone) has a null label. Each line of a claim with a verdict says its status: agreed, adjudicated, or disputed
    (reviewers disagree, no adjudication: the readers leave it out until it is settled)."""
    db = _serve_parts()
    from groundjudge.serve import store

    engine = db.open_db(db_url, migrate=False)
    if engine.dialect.name == "sqlite" and engine.url.database:  # the export would empty the database it reads
        database = engine.url.database
        not_an_input("--out", out, *(Path(database + end) for end in ("", "-wal", "-shm")))
    counts = store.export_counts(store.write_export(engine, out))

    def many(n: int, what: str) -> str:
        return f"{n} {what}{'' if n == 1 else 's'}"

    said = (
        f"wrote {out}: {many(counts['verdicts'], 'verdict')}, "
        f"{many(counts['without_verdict'], 'decision')} without a verdict (cleared, or a note or citation choice "
        f"alone), {many(counts['adjudications'], 'adjudication')}, {many(counts['disputed'], 'disputed claim')}"
    )
    err.print(escape(said), highlight=False)
    open_ = counts["disputed"]
    if open_:
        err.print(
            escape(
                f'{open_} claim(s) with reviewers who disagree and no adjudication, marked "status": "disputed": '
                "metrics, calibrate, tune and compare leave them out (a disputed label teaches nothing) until an "
                "adjudicator settles them on the team page (/team) or with POST /api/adjudications; then export again"
            ),
            highlight=False,
        )
