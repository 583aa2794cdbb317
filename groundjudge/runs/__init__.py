"""Dataset runs: one engine contract (``engines``: ``score_file`` from Python, ``score_rows`` for the CLI) over two
engines (``local`` here, ``ray`` on a cluster), one OUT store (``out``: the input checks, resume, retry-errors,
overwrite, :class:`RunResult` and :class:`RunStopped`) and one reader of rows (``groundjudge.io``).

Never imports ``cli``; the two engines never import each other; both read rows through ``io``, write OUT through
``runs.out`` and score through the pipeline's public calls (``Evaluator``, ``pipeline.fallback``).
"""

from __future__ import annotations

from groundjudge.runs.engines import score_file, score_rows
from groundjudge.runs.out import RunResult, RunStopped, pending_rows

__all__ = ["RunResult", "RunStopped", "pending_rows", "score_file", "score_rows"]
