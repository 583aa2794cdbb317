"""Dataset runs: two engines (``local`` here, ``ray`` on a cluster) over one OUT store (``out``: resume,
retry-errors, overwrite) and one reader of rows (``groundjudge.io``).

Never imports ``cli``; the two engines never import each other; both read rows through ``io`` and write OUT
through ``runs.out``. ``score_file`` is the local engine's; the Ray engine's is ``groundjudge.runs.ray.score_file``.
"""

from __future__ import annotations

from groundjudge.runs.local import RunResult, score_file, score_rows

__all__ = ["RunResult", "score_file", "score_rows"]
