"""The review service (``groundjudge review serve``): a team reviews flagged answers in a real database.

``db`` (tables, schema versions, the engine: SQLite in WAL mode by default, PostgreSQL by URL, writes retried when
busy), ``store`` (loading runs, reviewers and tokens, decisions and their append-only history, assignment, progress,
disagreements and adjudication, the export), ``progress`` (the team's progress, counted by the database and kept
until the review changes), ``auth`` (tokens, sessions, CSRF, the sign-in rate limit), ``page``
(the review page of :mod:`groundjudge.review.html`, served from the database) and ``app`` (the HTTP API under
``/api`` and the pages, on FastAPI).

Needs the ``serve`` extra (fastapi, uvicorn, sqlalchemy, psycopg). Imports ``models``, ``errors``, ``atomic``, ``io``
and ``review``; nothing in groundjudge imports it but the CLI (``cli/review_serve.py``).
"""
