"""The local checker learns from decided claims: where labels come from, thresholds and verdict heads
(``calibrate``), fine-tuning (``tune``, with what it trains each kind of checker towards in ``objective``).

Never imports ``pipeline``, ``runs`` or ``cli``: an evaluator is handed in when one is needed.
"""
