"""Dataset runs: two engines (local and Ray) over one OUT store (resume, retry-errors, overwrite).

Never imports ``cli``; the two engines never import each other; both read rows through ``io`` and write OUT
through ``runs.out``.
"""
