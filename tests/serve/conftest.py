"""The review service's test parts: a scored run to review, the service started as users start it (``groundjudge
review serve`` in a subprocess on a free local port), reviewers, and a throwaway PostgreSQL cluster (Debian's
package) for the tests that run on PostgreSQL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundjudge.models import AnswerReport, Claim, ClaimVerdict, Quote, Scores, Span

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '</script><img src=x onerror="window.pwned=1"><b>bold</b>&amp; "q" \'s\' \u2028 🧪 end'


def need_serve() -> None:
    """At the top of each test module: skip it without the serve extra (fastapi, uvicorn, sqlalchemy), and fail it
    under CI, which installs it (the dev extra)."""
    try:
        import fastapi  # noqa: F401
        import sqlalchemy  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        message = f"the review service needs the serve extra: pip install -e '.[serve]' ({exc})"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)


def make_report(rid: str, n_claims: int = 2, hostile: bool = False, label: str = "UNSUPPORTED") -> AnswerReport:
    """A flagged answer with ``n_claims`` claims (hostile text in every field when asked)."""
    bad = HOSTILE if hostile else ""
    texts = [f"Claim {i} of {rid}.{bad}" for i in range(n_claims)]
    answer = " ".join(texts)
    claims = []
    pos = 0
    for i, t in enumerate(texts):
        claims.append(
            ClaimVerdict(
                claim=Claim(
                    id=f"c{i}{bad if hostile and i == 0 else ''}",
                    text=t,
                    span=Span(start=pos, end=pos + len(t), text=t),
                ),
                label=label if i == 0 else "SUPPORTED",
                route="judge",
                reason=f"reason {i}{bad}",
                quotes=[Quote(doc=0, text=f"source text{bad}", start=15, end=26 + len(bad), verified=True)]
                if i
                else [],
            )
        )
        pos += len(t) + 1
    return AnswerReport(
        id=rid,
        question=f"Question of {rid}?{bad}",
        answer=answer,
        contexts=[f"A source says: source text{bad}. More words."],
        verdict="FAIL",
        mode="cascade",
        scores=Scores(n_claims=n_claims, combined=0.3),
        claims=claims,
        verdict_reasons=[f"why{bad}"],
        errors=[],
    )


def write_run(path: Path, reports: list[AnswerReport]) -> Path:
    """Write ``reports`` as a scored file (one report a line)."""
    from groundjudge.io.reports import dumps

    path.write_text("".join(dumps(r) + "\n" for r in reports), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    """``groundjudge review serve`` in a subprocess; ``kill()`` sends SIGKILL, ``start()`` starts it again."""

    def __init__(self, runs: list[Path], db: str, folder: Path, *extra: str) -> None:
        self.runs, self.db, self.extra = runs, db, list(extra)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"serve-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> Service:
        cmd = [
            sys.executable,
            "-m",
            "groundjudge",
            "review",
            "serve",
            *map(str, self.runs),
            "--db",
            self.db,
            "--port",
            str(self.port),
            *self.extra,
        ]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"review serve exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/api/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"review serve did not answer in {timeout} s: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def add_reviewer(db: str, name: str, adjudicator: bool = False) -> str:
    """A reviewer's token, made as the command makes it (in this process: the command's function)."""
    from typer.testing import CliRunner

    from groundjudge.cli.root import app

    args = ["review", "add-reviewer", name, "--db", db] + (["--adjudicator"] if adjudicator else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def export(db: str, out: Path) -> list[dict[str, Any]]:
    """``groundjudge review export`` (in this process), read back."""
    from typer.testing import CliRunner

    from groundjudge.cli.root import app

    result = CliRunner().invoke(app, ["review", "export", "--db", db, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


# -- PostgreSQL: a throwaway cluster from Debian's package ----------------------------------------------------------


def new_database(kind: str, request: pytest.FixtureRequest, folder: Path) -> str:
    """An empty database of ``kind``: a SQLite file, or a new database in the session's PostgreSQL cluster."""
    if kind == "sqlite":
        return f"sqlite:///{folder / 'review.sqlite'}"
    import uuid

    import psycopg

    server = request.getfixturevalue("postgres")
    name = "gj_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.rsplit("/", 1)[0] + "/" + name


def _pg_bin() -> Path | None:
    for name in ("initdb", "pg_ctl"):
        if shutil.which(name) is None:
            break
    else:
        return Path(shutil.which("pg_ctl") or "").resolve().parent
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return found[-1].parent if found else None


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a fresh PostgreSQL cluster on a free port (its data in a temporary folder), stopped at the end.
    Missing, it skips the test, and fails it under CI (.ci/run installs the package)."""
    folder = _pg_bin()
    if folder is None:
        message = "PostgreSQL needed: apt-get install postgresql"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # initdb and postgres refuse to run as root: as root, run them as the postgres user, in a folder of its own
    # (pytest's temporary folders are root's alone)
    as_root = os.geteuid() == 0
    top = Path(tempfile.mkdtemp(prefix="gj-pg-")) if as_root else tmp_path_factory.mktemp("pg")
    data = top / "data"
    port = free_port()
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(top, "postgres")
    subprocess.run(
        [*prefix, str(folder / "initdb"), "-D", str(data), "-U", "gj", "--auth=trust", "-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
    )
    opts = f"-p {port} -k {data.parent} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [*prefix, str(folder / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(data.parent / "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://gj@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, str(folder / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
        if as_root:
            shutil.rmtree(top, ignore_errors=True)
