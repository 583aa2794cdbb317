"""One module per stage of an evaluation (claims, judge, QA, scores, routing); no stage imports another.

Never imports ``pipeline``, ``runs``, ``learn``, ``review`` or ``cli``.
"""
