"""The review service's team progress at scale: how long ``GET /api/team``'s count (``progress.count_team``) and a
decision (``store.decide``) take on a review database holding many decisions.

    .venv/bin/python benchmarks/review_team.py --answers 6000 --decisions 60000

A SQLite database in a temporary folder: ``--answers`` answers of 5 claims (a fifth of them for two reviewers),
``--reviewers`` reviewers, every answer assigned; ``--decisions`` decisions on random claims by random reviewers
(a quarter of them withdrawn verdicts, label null), stored in one transaction and then counted from scratch, as the
schema's migration counts a database's decisions; then ``--repeat`` counts and ``--writes`` more decisions through
the store, one transaction each, as the API stores them. Prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import Connection

from groundjudge.models import AnswerReport, Claim, ClaimVerdict, Scores, Span
from groundjudge.serve import db, load, progress, store

LABELS = ["SUPPORTED", "CONTRADICTED", "UNSUPPORTED", None]


def report(rid: str, n_claims: int = 5) -> AnswerReport:
    texts = [f"Claim {i} of {rid}." for i in range(n_claims)]
    claims, pos = [], 0
    for i, t in enumerate(texts):
        span = Span(start=pos, end=pos + len(t), text=t)
        claims.append(ClaimVerdict(claim=Claim(id=f"c{i}", text=t, span=span), label="UNSUPPORTED", route="judge"))
        pos += len(t) + 1
    return AnswerReport(
        id=rid,
        question=f"Question of {rid}?",
        answer=" ".join(texts),
        contexts=["A source."],
        verdict="FAIL",
        mode="cascade",
        scores=Scores(n_claims=n_claims, combined=0.3),
        claims=claims,
        errors=[],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=6000)
    ap.add_argument("--decisions", type=int, default=60000)
    ap.add_argument("--reviewers", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--writes", type=int, default=200)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="gj-review-bench-"))
    engine = db.open_db(f"sqlite:///{folder / 'review.sqlite'}")
    load.load_runs(engine, [("run", [report(f"a{i}") for i in range(args.answers)])], overlap=0.2)
    for i in range(args.reviewers):
        store.add_reviewer(engine, f"r{i}")
    ids = [r["id"] for r in store.reviewers(engine)]
    rnd = random.Random(0)

    def fill(conn: Connection) -> None:
        claims = [(int(r.id), int(r.answer_pk)) for r in conn.execute(db.claims.select())]
        rows = [
            {
                "claim_pk": rnd.choice(claims)[0],
                "reviewer_id": rnd.choice(ids),
                "label": rnd.choice(LABELS),
                "note": "",
                "citation": None,
                "decided_at": db.now(),
                "request_id": None,
            }
            for _ in range(args.decisions)
        ]
        conn.execute(db.decisions.insert(), rows)
        for n, answer in enumerate(sorted({a for _, a in claims})):
            row = {"answer_pk": answer, "slot": 0, "reviewer_id": ids[n % len(ids)], "assigned_at": db.now()}
            conn.execute(db.assignments.insert().values(**row))

    db.write(engine, fill)
    start = time.perf_counter()
    if hasattr(db, "rebuild_tallies"):  # the running totals (schema 2) counted from the decisions, as migrated
        db.write(engine, db.rebuild_tallies)
    rebuilt = time.perf_counter() - start
    counts = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        db.read(engine, progress.count_team)
        counts.append(time.perf_counter() - start)
    answers = [f"a{i}" for i in range(args.answers)]
    writes = []
    for _ in range(args.writes):
        start = time.perf_counter()
        store.decide(engine, rnd.choice(ids), rnd.choice(answers), f"c{rnd.randrange(5)}", rnd.choice(LABELS))
        writes.append(time.perf_counter() - start)
    engine.dispose()
    out = {
        "answers": args.answers,
        "decisions": args.decisions,
        "reviewers": args.reviewers,
        "count_s_median": round(statistics.median(counts), 4),
        "count_s_max": round(max(counts), 4),
        "decide_ms_median": round(1000 * statistics.median(writes), 2),
        "decide_ms_p95": round(1000 * sorted(writes)[int(0.95 * (len(writes) - 1))], 2),
        "rebuild_s": round(rebuilt, 3),
    }
    for k, v in out.items():
        print(f"{k:>18}  {v}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
