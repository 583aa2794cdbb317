"""The review service's HTTP side (FastAPI): the API under ``/api`` (OpenAPI at ``/api/openapi.json``) and the
pages (``/`` the reviewer's queue, ``/team`` the team's progress and disagreements, sign-in and sign-out).

Every route but ``/api/health`` and the sign-in page needs a reviewer: an ``Authorization: Bearer TOKEN`` header,
or the page's session cookie, with its CSRF token on anything that changes data. A decision is answered only after
its transaction committed.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlsplit

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from groundjudge.errors import InputError
from groundjudge.review.metrics import parse_reviews
from groundjudge.serve import auth, progress, store
from groundjudge.serve.db import SCHEMA_VERSION, ReviewDatabaseError
from groundjudge.serve.page import review_page, signin_page, team_page

log = logging.getLogger("groundjudge.serve")

_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a browser send "Origin: null" on our own forms
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


MAX_BODY = 1 << 20  # a request body's bytes: a decision holds at most a 10,000-character note


class BodyLimit:
    """Refuses (413) a request whose body is over ``limit`` bytes before any route reads it: FastAPI reads and
    parses a body before it asks who sent it, so without this anyone who reaches the port could make the service
    hold a body of any size in memory. A body is read here (it is small) and handed on whole."""

    def __init__(self, app: Any, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.limit:
            await self._refuse(send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.limit:
                await self._refuse(send)
                return
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps({"detail": f"the request body is over {self.limit} bytes"}).encode()
        headers = [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[dict[str, Any]], receive: Any) -> Any:
    """A receive that hands out ``messages`` first, then waits on ``receive`` (for the client's going away)."""

    async def again() -> Any:
        return messages.pop(0) if messages else await receive()

    return again


class DecisionIn(BaseModel):
    """A reviewer's decision on one claim."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The answer's id (its report's id).")
    claim_id: str = Field(description="The claim's id within the answer.")
    label: str | None = Field(description="SUPPORTED, CONTRADICTED or UNSUPPORTED; null clears the verdict.")
    note: str = Field("", description="Why (kept in the history and the export).")
    citation: str | None = Field(None, description="RIGHT or WRONG: the reviewer's view of the claim's citation.")
    reviewer: str | None = Field(None, description="Optional; if given it must be the caller's own name.")
    request_id: str | None = Field(
        None, description="A key of the client's choosing: the same request sent again is stored once."
    )


class AdjudicationIn(BaseModel):
    """An adjudicator's label for a claim reviewers disagree on."""

    model_config = ConfigDict(extra="forbid")

    id: str
    claim_id: str
    label: str = Field(description="SUPPORTED, CONTRADICTED or UNSUPPORTED.")
    note: str = ""
    request_id: str | None = None


class DecisionOut(BaseModel):
    """A stored decision (answered once committed)."""

    decision: int = Field(description="Its number in the append-only history.")
    id: str
    claim_id: str
    label: str | None
    note: str
    citation: str | None
    decided_at: str
    reviewer: str
    duplicate: bool = Field(description="True when this request_id was stored before: nothing new was stored.")


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _same_origin(request: Request) -> bool:
    """A browser's request from another site names it in Origin: refused for anything that changes data. Ours is
    the Host the request came to, or an origin ``--origin`` names (a proxy that rewrites Host: nginx's default)."""
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return origin is None
    if urlsplit(origin).netloc == request.headers.get("host", ""):
        return True
    return origin.rstrip("/").lower() in request.app.state.origins


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of the address reviewers open (``--origin``), as a browser's Origin header says it.

    Raises:
        InputError: not an http(s) URL.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"--origin {url!r} is not an http(s) address such as https://review.example.org")
    return f"{parts.scheme}://{parts.netloc}".lower()


def caller(request: Request) -> auth.Reviewer:
    """The signed-in reviewer: a bearer token, else the session cookie (and, to change data, its CSRF token)."""
    st = request.app.state
    client = _client(request)
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(401, "the Authorization header must be 'Bearer TOKEN'", {"WWW-Authenticate": "Bearer"})
        who = auth.check_token(st.engine, token.strip())  # a valid token always passes: the limit counts failures
        if who is None:
            wait = st.limit.blocked(client)
            if wait:
                raise HTTPException(
                    429, f"too many bad tokens: try again in {wait:.0f} s", {"Retry-After": f"{wait:.0f}"}
                )
            st.limit.failed(client)
            log.warning("bad token from %s", client)
            raise HTTPException(401, "invalid token", {"WWW-Authenticate": "Bearer"})
        return who
    cookie = request.cookies.get(auth.SESSION_COOKIE)
    who = auth.check_session(st.engine, cookie) if cookie else None
    if who is None:
        raise HTTPException(
            401,
            "sign in: send 'Authorization: Bearer TOKEN' (groundjudge review add-reviewer prints a token)",
            {"WWW-Authenticate": "Bearer"},
        )
    if request.method not in ("GET", "HEAD") and (
        not _same_origin(request) or not auth.csrf_ok(who, request.headers.get("x-csrf-token"))
    ):
        raise HTTPException(403, "missing or wrong CSRF token (X-CSRF-Token) for this session")
    return who


Caller = Annotated[auth.Reviewer, Depends(caller)]


def check_takes(batch: int, max_open: int) -> None:
    """The answers a take gives (``--batch``) and the most a reviewer holds unfinished (``--max-open``): each at
    least 1, and a take no bigger than what a reviewer may hold.

    Raises:
        InputError: either under 1, or ``batch`` over ``max_open``.
    """
    if batch < 1 or max_open < 1:
        raise InputError(f"--batch ({batch}) and --max-open ({max_open}) must be at least 1")
    if batch > max_open:
        raise InputError(
            f"--batch {batch} is over --max-open {max_open}: a take would give a reviewer more answers than they may "
            "hold unfinished"
        )


def create_app(
    engine: Engine,
    batch: int = 10,
    max_open: int = 50,
    order: str = "risk",
    only_flagged: bool = True,
    sign_in_limit: int = 10,
    secure_cookie: bool = False,
    origins: Sequence[str] = (),
) -> FastAPI:
    """The service on ``engine``: each reviewer is given ``batch`` answers at a time and holds at most ``max_open``
    unfinished (:func:`check_takes`: a take never passes it; More answers at it is refused); at most
    ``sign_in_limit`` failed sign-ins (or bad tokens) per client address a minute; ``secure_cookie`` for HTTPS;
    ``origins``, the addresses reviewers open when they are not the Host the service sees (behind a proxy)."""
    check_takes(batch, max_open)
    app = FastAPI(
        title="groundjudge review",
        description="Reviewers' decisions on groundjudge's claim verdicts, kept in a database (README: review).",
        version=str(SCHEMA_VERSION),
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.engine = engine
    app.state.limit = auth.RateLimit(sign_in_limit, 60.0)
    app.state.origins = frozenset(origin_of(o) for o in origins)
    app.state.team = progress.TeamProgress(engine)  # every reviewer's page polls it
    app.add_middleware(BodyLimit, limit=MAX_BODY)

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        for k, v in _HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    @app.exception_handler(ReviewDatabaseError)
    async def unreachable(_request: Request, exc: ReviewDatabaseError) -> JSONResponse:
        log.error("%s", exc)
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(InputError)
    async def bad_input(_request: Request, exc: InputError) -> JSONResponse:
        codes = {store.NotFoundError: 404, store.ForbiddenError: 403, store.ConflictError: 409, store.FullError: 409}
        code = next((c for kind, c in codes.items() if isinstance(exc, kind)), 422)
        return JSONResponse({"detail": str(exc)}, status_code=code)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        def one(e: dict[str, Any]) -> str:
            if e.get("type") == "json_invalid":  # its loc is ("body", the character's place): no field of the body
                at = e.get("loc", ())[-1]
                why = (e.get("ctx") or {}).get("error", "")
                return f"body: not valid JSON ({why}{', ' if why else ''}at character {at})"
            return f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg', 'invalid')}"

        said = "; ".join(one(e) for e in exc.errors())
        return JSONResponse({"detail": said or "invalid request"}, status_code=422)

    takes = {"batch": batch, "max_open": max_open}
    _api(app, engine, **takes)
    _pages(app, engine, **takes, order=order, only_flagged=only_flagged, secure_cookie=secure_cookie)
    return app


def _api(app: FastAPI, engine: Engine, *, batch: int, max_open: int) -> None:
    """The HTTP API under ``/api`` (OpenAPI at ``/api/openapi.json``): what the page and scripts call."""

    @app.get("/api/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Whether the service and its database answer (no sign-in needed, no data)."""
        store.read_ok(engine)
        return {"ok": True, "schema": SCHEMA_VERSION}

    @app.get("/api/me", tags=["reviewer"])
    def me(who: Caller) -> dict[str, Any]:
        """Who the token (or session) belongs to; under a session, its CSRF token too (a page loaded before its
        reviewer signed in again, in another tab, takes the new session's token from here)."""
        return {"name": who.name, "role": who.role} | ({"csrf": who.csrf} if who.csrf else {})

    @app.post("/api/decisions", tags=["reviewer"], response_model=DecisionOut)
    def post_decision(body: DecisionIn, who: Caller) -> dict[str, Any]:
        """Store the caller's decision on a claim; answered once committed. The latest decision per reviewer and
        claim counts; every one is kept in the history. 404: no such answer or claim; 422: a bad label;
        403: a ``reviewer`` other than the caller."""
        if body.reviewer is not None and body.reviewer != who.name:
            raise HTTPException(403, f"this token decides as {who.name!r}, not as {body.reviewer!r}")
        out = store.decide(
            engine, who.id, body.id, body.claim_id, body.label, body.note, body.citation, body.request_id
        )
        return {**out, "reviewer": who.name}

    @app.get("/api/decisions", tags=["reviewer"])
    def get_decisions(who: Caller) -> list[dict[str, Any]]:
        """The caller's latest decision on each claim they decided (label null: cleared)."""
        return store.my_decisions(engine, who.id)

    @app.get("/api/queue", tags=["reviewer"])
    def get_queue(who: Caller) -> dict[str, Any]:
        """The caller's assigned answers in queue order, with their claims decided, and the totals."""
        return store.my_queue(engine, who.id)

    @app.post("/api/queue/next", tags=["reviewer"])
    def next_work(who: Caller) -> dict[str, Any]:
        """Take the next answers of the team queue (up to the batch size more, never past ``--max-open``
        unfinished), then the caller's queue. 409: the caller holds ``--max-open`` unfinished answers already."""
        store.take_work(engine, who.id, batch, more=True, max_open=max_open)
        return store.my_queue(engine, who.id)

    @app.get("/api/progress", tags=["reviewer"])
    def progress(who: Caller) -> dict[str, Any]:
        """The caller's progress: answers and claims assigned and decided."""
        mine = store.my_queue(engine, who.id)
        return {k: v for k, v in mine.items() if k != "answers"} | {"name": who.name}

    @app.get("/api/team", tags=["team"])
    def get_team(who: Caller) -> dict[str, Any]:
        """The team's progress: per reviewer and for the queue (assigned, decided, agreement, disagreements)."""
        result: dict[str, Any] = app.state.team()
        return result

    @app.get("/api/disagreements", tags=["team"])
    def get_disagreements(who: Caller, open_only: bool = False) -> list[dict[str, Any]]:
        """Claims whose reviewers disagree, each reviewer's label and note, and the adjudication if any."""
        return store.disagreements(engine, include_settled=not open_only)

    @app.post("/api/adjudications", tags=["team"], response_model=DecisionOut)
    def post_adjudication(body: AdjudicationIn, who: Caller) -> dict[str, Any]:
        """Settle a claim (adjudicators only): the label the export gives it."""
        out = store.adjudicate(engine, who.id, body.id, body.claim_id, body.label, body.note, body.request_id)
        return {**out, "reviewer": who.name}

    @app.get("/api/history", tags=["team"])
    def get_history(
        who: Caller,
        after: Annotated[int, Query(ge=0, le=2**62, description="Entries numbered after this one.")] = 0,
        limit: int = 1000,
        kind: Annotated[
            Literal["decision", "adjudication"] | None,
            Query(description="One kind, in number order: page it with the last entry's n as the next after."),
        ] = None,
    ) -> list[dict[str, Any]]:
        """Who decided what and when: every decision and adjudication ever stored, oldest first. The two kinds are
        numbered apart: to page, ask for one kind at a time."""
        return store.history(engine, after, max(1, min(limit, 10_000)), kind)

    @app.get("/api/export", tags=["team"], response_class=PlainTextResponse)
    def export(who: Caller) -> str:
        """The decisions as JSONL, as ``groundjudge review export`` writes them."""
        return "".join(store.dumps_line(line) + "\n" for line in store.export_lines(engine))


def _pages(
    app: FastAPI, engine: Engine, *, batch: int, max_open: int, order: str, only_flagged: bool, secure_cookie: bool
) -> None:
    """The pages: sign-in, a reviewer's queue, the team view (CSP with a nonce, session cookie, CSRF)."""

    def html(body: str, nonce: str = "", status: int = 200) -> HTMLResponse:
        csp = (
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
            f"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; script-src 'nonce-{nonce or 'none'}'"
        )
        return HTMLResponse(body, status_code=status, headers={"Content-Security-Policy": csp})

    def signed_in(request: Request) -> auth.Reviewer | None:
        cookie = request.cookies.get(auth.SESSION_COOKIE)
        return auth.check_session(engine, cookie) if cookie else None

    async def form(request: Request) -> dict[str, str]:
        raw = await request.body()
        return {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}

    @app.get("/", include_in_schema=False)
    def index(request: Request) -> Response:
        who = signed_in(request)
        if who is None:
            return html(signin_page())
        store.take_work(engine, who.id, batch, max_open=max_open)
        said = {  # what /more got, when it got nothing: only these lines, never text from the address
            "full": f"You hold as many unfinished answers as a reviewer may ({max_open}): finish some, then ask "
            "for more.",
            "none": "The team's queue has no answer left for you.",
        }.get(request.query_params.get("said", ""), "")
        asked = request.query_params.get("finished", "0")  # ASCII digits only: '²'.isdigit() holds, int('²') fails
        number = asked.isascii() and asked.isdigit() and len(asked) < 9
        window = store.reviewer_window(engine, who.id, int(asked) if number else 0)
        shown = store.shown_answers(window.answers)
        nonce = secrets.token_urlsafe(16)
        page = review_page(
            window.items,
            who.name,
            who.role,
            who.csrf or "",
            store.my_decisions(engine, who.id, shown),
            nonce,
            order,
            only_flagged,
            title=f"groundjudge review: {who.name}'s queue",
            reviews=parse_reviews(store.dumps_line(line) for line in store.export_lines(engine, answers=shown)) or None,
            notice=said,
            window=window,
        )
        return html(page, nonce)

    @app.get("/team", include_in_schema=False)
    def team_view(request: Request) -> Response:
        who = signed_in(request)
        if who is None:
            return RedirectResponse("./", 303)
        nonce = secrets.token_urlsafe(16)
        page = team_page(app.state.team(), store.disagreements(engine), who.name, who.role, who.csrf or "", nonce)
        return html(page, nonce)

    @app.get("/signin", include_in_schema=False)
    @app.get("/signout", include_in_schema=False)
    @app.get("/more", include_in_schema=False)
    def form_target() -> Response:
        """A form's address opened as a page (reloaded, bookmarked, typed): the reviewer's page, not a JSON 405."""
        return RedirectResponse("./", 303)

    @app.post("/signin", include_in_schema=False)
    async def signin(request: Request) -> Response:
        client = _client(request)
        if not _same_origin(request):
            return html(signin_page("Sign in from this service's own page."), status=403)
        token = (await form(request)).get("token", "").strip()
        who = auth.check_token(engine, token) if token else None  # a valid token always passes
        if who is None:
            wait = app.state.limit.blocked(client)
            if wait:
                return html(signin_page(f"Too many failed sign-ins: try again in {wait:.0f} s."), status=429)
            app.state.limit.failed(client)
            log.warning("failed sign-in from %s", client)
            return html(signin_page("That token is not valid."), status=401)
        value, _csrf = auth.new_session(engine, who)
        out = RedirectResponse("./", 303)
        out.set_cookie(
            auth.SESSION_COOKIE,
            value,
            max_age=auth.SESSION_HOURS * 3600,
            httponly=True,
            samesite="strict",
            secure=secure_cookie,
            path="/",
        )
        return out

    async def _session_form(request: Request) -> tuple[auth.Reviewer | None, str | None]:
        who = signed_in(request)
        sent = (await form(request)).get("csrf")
        if who is None or not _same_origin(request) or not auth.csrf_ok(who, sent):
            return who, None
        return who, request.cookies.get(auth.SESSION_COOKIE)

    @app.post("/signout", include_in_schema=False)
    async def signout(request: Request) -> Response:
        who, cookie = await _session_form(request)
        if who is not None and cookie is None:
            return html(signin_page("Sign-out refused: a wrong CSRF token."), status=403)
        if cookie:
            auth.end_session(engine, cookie)
        out = RedirectResponse("./", 303)
        out.delete_cookie(auth.SESSION_COOKIE, path="/")
        return out

    @app.post("/more", include_in_schema=False)
    async def more(request: Request) -> Response:
        who, cookie = await _session_form(request)
        if who is None or cookie is None:
            return html(signin_page("Sign in again."), status=403)
        try:
            added = store.take_work(engine, who.id, batch, more=True, max_open=max_open)
        except store.FullError:
            return RedirectResponse("./?said=full", 303)
        return RedirectResponse("./" if added else "./?said=none", 303)


def cannot_listen(host: str, port: int) -> str | None:
    """Why the service could not listen on ``host``:``port`` (in use, not an address of this machine, a port under
    1024 without the right), or None when it can: asked before the runs are loaded, as uvicorn binds (address reuse
    on, so a port in TIME_WAIT is free), for a clear error instead of uvicorn's after the loading."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        return f"{host} is no address to listen on ({exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def run(app: FastAPI, host: str, port: int) -> None:
    """Serve ``app`` on ``host``:``port`` (uvicorn) until stopped; its access log names paths, never tokens."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="info", access_log=True, server_header=False)
