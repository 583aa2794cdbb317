"""groundjudge inside the evaluation tools people already run. One module per tool, each needing its extra:

- :mod:`groundjudge.adapters.ragas`: :class:`GroundjudgeMetric`, a RAGAS single-turn metric for ``ragas.evaluate``
  (``pip install 'groundjudge[ragas]'``);
- :mod:`groundjudge.adapters.deepeval`: :class:`GroundjudgeMetric`, a DeepEval ``BaseMetric`` for
  ``deepeval.evaluate`` and ``assert_test`` (``pip install 'groundjudge[deepeval]'``);
- :mod:`groundjudge.adapters.inspect`: :func:`groundjudge_scorer`, an Inspect ``@scorer``
  (``pip install 'groundjudge[inspect]'``);
- :mod:`groundjudge.adapters.promptfoo`: :func:`get_assert`, a promptfoo Python assertion (no Python extra: promptfoo
  itself comes from npm).

All of them check an answer the same way, through :mod:`groundjudge.adapters.common`: one
:class:`~groundjudge.pipeline.Evaluator` (cache, budget, local checker) per adapter instance, by default the one the
pytest plugin and :func:`groundjudge.testing.assert_grounded` use (``GROUNDJUDGE_LLM``, else nli mode), so a suite
run again is answered from the cache. Only this package imports ragas, deepeval, inspect_ai; nothing else in
groundjudge imports this package. Importing this package imports none of the tools.
"""

from __future__ import annotations
